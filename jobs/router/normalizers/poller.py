"""The poller: `dispatch_requested` for a queued ticket whose webhook was missed (no decision in the window)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobs.router.normalizers.envelope import build
from storage.models import Ticket
from svc.clock import iso

POLLER_ACTOR = {"kind": "system", "id": "svc:poller"}


def dispatch_request(ticket: Ticket, *, at: datetime, tick: datetime) -> dict[str, Any]:
    """One envelope per ticket per poller tick: the tick's time is in the id, so a repeated tick is one event."""
    subject: dict[str, Any] = {"type": "ticket", "id": ticket.key}
    if ticket.initiative_id:
        subject["initiative_id"] = ticket.initiative_id
    if ticket.tracker_issue_id:
        subject["tracker_issue_id"] = ticket.tracker_issue_id
    return build(
        event_id=f"poller:{ticket.key}:{tick.strftime('%Y%m%dT%H%M%SZ')}",
        occurred_at=iso(at),
        source="poller",
        kind="dispatch_requested",
        from_state=None,
        to_state="queued",
        subject=subject,
        actor=dict(POLLER_ACTOR),
        eligible_for_worker=True,
        suggested_role="coder",
    )
