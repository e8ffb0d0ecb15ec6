"""The contract's JSON shapes for domain objects (those the archivist writes too: `domain/shapes.py`). Empty values
are null, never ""."""

from __future__ import annotations

from typing import Any

from domain.automation import AutomationState
from domain.board import SlotView
from domain.clock import iso
from domain.router.policy_versions import PolicyVersion
from domain.shapes import decision as decision
from domain.shapes import gap as gap
from domain.shapes import job as job
from domain.shapes import run as run
from domain.shapes import timeline_entry as timeline_entry
from domain.writing import Report
from machines.job import ACTIVE
from storage import wallet as storage_wallet
from storage.models import Initiative, Ticket, TimelineEntry, Wallet

# `decision`, `gap`, `job`, `run` and `timeline_entry` (imported above) are shaped in the domain, since the archivist
# writes those rows out in the same shapes; they are answered from here as every other.


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
