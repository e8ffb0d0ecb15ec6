"""The poller (agent `poller`, every 5 minutes): asks for dispatch of tickets whose webhook was missed.

A ticket that has sat in `queued` for longer than `SVC_POLLER_WINDOW_MINUTES` with no router decision about it
in that window gets one `dispatch_requested` event (source `poller`), routed like any other.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from domain.clock import Clock, iso
from domain.config import Config
from domain.ops import runs
from domain.router.routing import Router
from domain.router.senders.payloads import build, ticket_subject
from storage import decisions
from storage.db import transaction
from storage.models import Ticket

AGENT_ID = "poller"
BATCH = 200
POLLER_ACTOR = {"kind": "system", "id": "svc:poller"}


def dispatch_request(ticket: Ticket, *, at: datetime, tick: datetime) -> dict[str, Any]:
    """One envelope per ticket per poller tick: the tick's time is in the id, so a repeated tick is one event."""
    return build(
        event_id=f"poller:{ticket.key}:{tick.strftime('%Y%m%dT%H%M%SZ')}",
        occurred_at=iso(at),
        source="poller",
        kind="dispatch_requested",
        from_state=None,
        to_state="queued",
        subject=ticket_subject(ticket),
        actor=dict(POLLER_ACTOR),
        eligible_for_worker=True,
        suggested_role="coder",
    )


class Poller:
    def __init__(self, router: Router, config: Config, clock: Clock):
        self.router = router
        self.window = timedelta(minutes=config.poller_window_minutes)
        self.clock = clock

    def __call__(self, trigger: runs.Trigger) -> int:
        """Run once; return how many dispatch requests were routed."""
        started = self.clock()
        tick = trigger.scheduled_for or started
        cutoff = started - self.window
        with transaction():
            missed = decisions.queued_without_decision(queued_before=cutoff, quiet_since=cutoff, limit=BATCH)
        outcomes: dict[str, int] = {}
        for ticket in missed:
            receipt = self.router.receive(dispatch_request(ticket, at=self.clock(), tick=tick))
            outcome = receipt.decision.outcome if receipt.decision else receipt.intake.value
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        summary = (
            f"dispatch requested for {len(missed)} queued ticket(s) with no decision in "
            f"{int(self.window.total_seconds() // 60)} minutes"
        )
        with transaction():
            runs.record(
                AGENT_ID,
                trigger=trigger,
                started_at=started,
                finished_at=self.clock(),
                status="OK",
                ok=True,
                summary=summary,
                details={"tickets": [t.key for t in missed], "outcomes": outcomes},
            )
        return len(missed)
