"""The contract's JSON shapes of the rows that leave the service as they are: what the API answers for a decision,
a timeline entry, an agent run, a dispatch job and a reconciliation gap (`api/representations.py` uses these), and
what the archivist (`domain/ops/archivist.py`) writes for each row it moves out, an outbox message too. Empty
values are null, never ""."""

from __future__ import annotations

from typing import Any

from domain.clock import iso
from domain.gaps import Gap
from storage.models import AgentRun, OutboxMessage, TimelineEntry

__all__ = ["decision", "gap", "job", "outbox_message", "run", "timeline_entry"]

# The outcome of a decision on an envelope that failed its schema (`domain/router/evaluation.REJECTED`: the router
# imports the ops agents, which shape what they archive here, so this module may not import the router back; a test
# holds the two equal).
REJECTED = "rejected"


def timeline_entry(entry: TimelineEntry) -> dict[str, Any]:
    return {"id": entry.id, "at": iso(entry.at), "kind": entry.kind, "summary": entry.summary, "data": entry.data}


def run(row: AgentRun) -> dict[str, Any]:
    return {
        "id": row.id,
        "agent_id": row.agent_id,
        "status": row.status,
        "ok": bool(row.ok),
        "started_at": iso(row.started_at),
        "finished_at": iso(row.finished_at),
        "summary": row.summary or "",
        "details": row.details,
    }


def gap(row: Gap) -> dict[str, Any]:
    """One entry of the reconciliation ledger."""
    return {
        "sender": row.sender,
        "hook": row.hook,
        "delivery": row.delivery,
        "guid": row.guid,
        "event": row.event,
        "found_at": iso(row.found_at),
        "state": row.state.value,
        "attempts": row.attempts,
        "detail": row.detail,
    }


def decision(row) -> dict[str, Any]:
    """A router decision as the contract shapes it; `errors` only on a rejected envelope."""
    body = {
        "id": row.id,
        "event_id": row.event_id,
        "evaluated_at": iso(row.evaluated_at),
        "mode": row.mode,
        "source": row.source,
        "kind": row.kind,
        "subject_id": row.subject_id,
        "outcome": row.outcome,
        "rule": row.rule,
        "role": row.role,
        "gates": row.gates or [],
        "dispatched": bool(row.dispatched),
        "held": bool(row.held),
        "job_id": row.job_id,
        "envelope": row.envelope,
        "policy": row.policy,
        "facts": row.facts,
    }
    if row.outcome == REJECTED:
        body["errors"] = row.errors or []
    return body


def job(row) -> dict[str, Any]:
    """A dispatch job as the contract shapes it (`dispatch-job.json`): a `storage.jobs.Job`, or a `DispatchJob` row,
    which reads the same."""
    return {
        "id": row.id,
        "decision_id": row.decision_id,
        "event_id": row.event_id,
        "ticket": row.ticket,
        "role": row.role,
        "rule": row.rule,
        "state": row.state,
        "bay": row.bay,
        "worker": row.worker,
        "attempts": row.attempts,
        "created_at": iso(row.created_at),
        "claimed_at": iso(row.claimed_at),
        "heartbeat_at": iso(row.heartbeat_at),
        "leased_until": iso(row.leased_until),
        "finished_at": iso(row.finished_at),
        "result": row.result,
        "failure": {"kind": row.failure_kind, "detail": row.failure_detail} if row.failure_kind else None,
        "retry_of": row.retry_of,
        "head_sha": row.head_sha,
        "forge": {
            "state": row.forge_state,
            "pull_request": row.forge_pull_request,
            "comment": row.forge_comment,
            "error": row.forge_error,
        },
    }


def outbox_message(row: OutboxMessage) -> dict[str, Any]:
    """An outbox message as it ended (no API serves these: its columns, times in the contract's format)."""
    return {
        "id": row.id,
        "kind": row.kind,
        "payload": row.payload,
        "status": row.status,
        "attempts": row.attempts,
        "last_error": row.last_error or None,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
        "sent_at": iso(row.sent_at),
    }
