"""The outbox handlers beside chat (`jobs/chat_delivery.py`): what the jobs process does with each queued
message, and what it notes on a ticket's timeline afterwards.

- `route_event`, queued by every stage change (`domain/router/board_events.py`): `RouteQueuedEvent`, the router
  records a decision;
- `slot_release`, queued by `mark_done` and cancel (`domain/board.py`): `SlotRelease`, the slot steward for that
  ticket;
- `tracker_close`, queued by `mark_done` of a PORT- ticket with a tracker issue: `TrackerClose`, Linear's
  completed state, best effort.

The tracker close happens after the `mark_done` committed, so nothing here can undo it. Transient failures are
tried again by the outbox; the final outcome — closed, or given up and why — goes onto the ticket's timeline.
"""

from __future__ import annotations

from domain.board import SLOT_RELEASE_KIND, TRACKER_CLOSE_KIND
from domain.clock import Clock
from domain.config import Config
from domain.ops.runs import Trigger
from domain.ops.steward import SlotSteward
from domain.router.board_events import ROUTE_KIND
from domain.router.routing import Router
from integrations.linear import LinearTracker
from integrations.transport import TransportError
from jobs.delivery import RETRY, SENT, Attempt, Outcome
from storage import tickets, timeline

# A wipe failing at mark_done/cancel is retried by the outbox a few times (5 s, 15 s, 60 s later), then left
# to the slot steward of the next pulse, which finds the claim still there.
SLOT_RELEASE_TRIES = 4

__all__ = ["ROUTE_KIND", "SLOT_RELEASE_KIND", "TRACKER_CLOSE_KIND", "RouteQueuedEvent", "SlotRelease", "TrackerClose"]


class RouteQueuedEvent:
    """`route_event`: route the queued envelope of a stage change and record its decision."""

    def __init__(self, router: Router):
        self.router = router

    def __call__(self, attempt: Attempt) -> Outcome:
        receipt = self.router.receive(attempt.payload)
        if receipt.decision is None:  # a duplicate whose decision is archived
            return Outcome.sent(receipt.intake.value, decision_id=None)
        return Outcome.sent(receipt.decision.outcome, decision_id=receipt.decision.id)


class SlotRelease:
    """`slot_release`, queued by mark_done/cancel: the slot steward, for that ticket."""

    def __init__(self, steward: SlotSteward, clock: Clock):
        self.steward = steward
        self.clock = clock

    def __call__(self, attempt: Attempt) -> Outcome:
        key = attempt.payload["ticket"]
        report = self.steward.run(Trigger(attempt.payload.get("reason") or "slot_release"), ticket=key)
        if report.failed:
            detail = "; ".join(f"wipe of {o.slot} failed: {o.detail}" for o in report.failed)
            if attempt.attempts + 1 < SLOT_RELEASE_TRIES:
                return Outcome.retry(detail)
            return Outcome.give_up(f"{detail}; the slot steward of the next pulse tries again")
        released = [o.slot for o in report.released]
        return Outcome.sent(f"released {', '.join(released) or 'nothing'}", released=released)

    def record(self, attempt: Attempt, outcome: Outcome) -> None:
        """The steward writes its own timeline entries; only a release that could not run at all is noted here."""
        if outcome.status == SENT or not tickets.exists(attempt.payload["ticket"]):
            return
        if outcome.detail.startswith("handler error"):
            timeline.append(
                attempt.payload["ticket"],
                kind="slot_release_failed",
                summary=f"slot release could not run ({outcome.detail}); the slot steward of the next pulse tries "
                "again",
                at=self.clock(),
                data={"detail": outcome.detail},
            )


class TrackerClose:
    """`tracker_close`: set the Linear issue to its team's completed state, and say on the timeline how it went."""

    def __init__(self, config: Config, clock: Clock):
        self.config = config
        self.clock = clock

    def __call__(self, attempt: Attempt) -> Outcome:
        if not self.config.tracker_api_key:
            return Outcome.give_up("SVC_TRACKER_API_KEY is no longer set: the tracker close was not sent")
        tracker = LinearTracker(self.config.tracker_api_url, self.config.tracker_api_key)
        try:
            closed = tracker.close_issue(attempt.payload["issue_id"])
        except TransportError as exc:
            return Outcome.failed(exc)
        finally:
            tracker.session.close()
        return Outcome.sent(closed.describe(), issue=closed.issue, state=closed.state, already=closed.already)

    def record(self, attempt: Attempt, outcome: Outcome) -> None:
        """The close's final outcome on the ticket's timeline (called in the outcome's transaction)."""
        key = attempt.payload["ticket"]
        if not tickets.exists(key):
            return
        issue = attempt.payload["issue_id"]
        data = {"issue_id": issue, "attempts": attempt.attempts + 1, "outcome": outcome.status, **outcome.result}
        if outcome.status == SENT:
            timeline.append(key, kind="tracker_closed", summary=outcome.detail, at=self.clock(), data=data)
            return
        how = f"gave up after {attempt.attempts + 1} attempts" if outcome.status == RETRY else "failed"
        timeline.append(
            key,
            kind="tracker_close_failed",
            summary=f"tracker close of {issue} {how}: {outcome.detail}; the ticket stays done",
            at=self.clock(),
            data={**data, "detail": outcome.detail},
        )
