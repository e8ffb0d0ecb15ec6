"""The contract's JSON shapes for domain objects. Empty values are null, never ""."""

from __future__ import annotations

from typing import Any

from domain.automation import AutomationState
from domain.board import SlotView
from domain.clock import iso
from domain.gaps import Gap
from domain.router.evaluation import REJECTED
from domain.router.policy_versions import PolicyVersion
from domain.writing import Report
from machines.job import ACTIVE
from storage import wallet as storage_wallet
from storage.jobs import Job
from storage.models import AgentRun, Initiative, Ticket, TimelineEntry, Wallet


def ticket(row: Ticket) -> dict[str, Any]:
    return {
        "key": row.key,
        "initiative_id": row.initiative_id,
        "title": row.title,
        "stage": row.stage,
        "waiting_on": row.waiting_on or None,
        "tracker_issue_id": row.tracker_issue_id or None,
        "assigned_slot": row.assigned_slot or None,
        "link": row.link or None,
        "needs_you": bool(row.needs_you),
        # The dispatch job a worker is on for it (queued or running), else null.
        "job": {"id": row.job_id, "state": row.job_state} if row.job_state in ACTIVE else None,
        "stage_changed_at": iso(row.stage_changed_at),
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
    }


def ticket_detail(row: Ticket, entries: list[TimelineEntry]) -> dict[str, Any]:
    body = ticket(row)
    body["timeline"] = [timeline_entry(e) for e in entries]
    return body


def timeline_entry(entry: TimelineEntry) -> dict[str, Any]:
    return {"id": entry.id, "at": iso(entry.at), "kind": entry.kind, "summary": entry.summary, "data": entry.data}


def initiative(row: Initiative) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "stage": row.stage,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
        "updated_by": row.updated_by or None,
    }


def slot(view: SlotView) -> dict[str, Any]:
    return {
        "name": view.slot.name,
        "ticket": view.claim.ticket_key if view.claim else None,
        "claimed_at": iso(view.claim.claimed_at) if view.claim else None,
        "last_activity_at": iso(view.slot.last_activity_at),
        "last_wiped_at": iso(view.slot.last_wiped_at),
    }


def wallet(row: Wallet) -> dict[str, Any]:
    return {
        "budget": float(row.budget),
        "spent": float(row.spent),
        "percent_used": storage_wallet.percent_used(row),
        "locked": bool(row.locked),
        "updated_at": iso(row.updated_at),
        "updated_by": row.updated_by or None,
    }


def dispatch_switch(switch) -> dict[str, Any]:
    """`domain/dispatch/switch.Switch` as `contracts/router-dispatch.json` shapes it."""
    return {
        "paused": switch.paused,
        "reason": switch.reason,
        "changed_by": switch.changed_by,
        "changed_at": iso(switch.changed_at),
    }


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


def page(name: str, items: list[dict[str, Any]], after: str | None) -> dict[str, Any]:
    return {name: items, "next": after}


def writing_report(report: Report) -> dict[str, Any]:
    """The answer to a notify: the ticket, its receipt, the agent run, and whether a chat post was queued."""
    return {
        "ticket": ticket(report.ticket),
        "receipt": timeline_entry(report.receipt),
        "run": run(report.run),
        "chat": "queued" if report.chat_queued else "none",
    }


def writing_automation(state: AutomationState) -> dict[str, Any]:
    return {"enabled": state.enabled, "updated_at": iso(state.updated_at), "updated_by": state.updated_by}


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


def job(row: Job) -> dict[str, Any]:
    """A dispatch job as the contract shapes it (`dispatch-job.json`)."""
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


def worker(view) -> dict[str, Any]:
    """A worker as `GET dispatch/workers` lists it (`dispatch-worker-list.json`)."""
    return {
        "account": view.account,
        "bay": view.bay,
        "job": view.job.id if view.job is not None else None,
        "last_heard_at": iso(view.last_heard_at),
    }


def policy_version(version: PolicyVersion) -> dict[str, Any]:
    """A version of the router's policy as the contract shapes it (`router-policy-version.json`)."""
    policy = version.policy
    return {
        "version": version.version,
        "policy": policy.document(),
        "set_by": version.set_by,
        "set_at": iso(version.set_at),
        "reason": version.reason,
        "forced": version.forced,
        "force": version.force,
        "rule_versions": policy.rule_versions(),
    }
