"""The board's own events reach the router through the outbox, not inside the change's transaction.

A stage change (a notify, a move) only adds one outbox row in its own transaction, so it stays as fast as it
was; the jobs process then routes the envelope (`route_event` handler). The row commits with the change, so no
event is lost; a delivery repeated after a crash is the same event id, so it is recorded once. The price: the
gates see the board as it is when the jobs process routes the event, a few seconds after the change.
"""

from __future__ import annotations

from jobs.delivery import Attempt, Outcome
from jobs.router.normalizers.board import envelope_for
from jobs.router.shadow import ShadowRouter
from storage import outbox
from svc.board import StageChange

ROUTE_KIND = "route_event"


def queue_for_router(change: StageChange) -> None:
    """Stage listener: queue the change's envelope for the router, in the change's transaction."""
    outbox.enqueue(ROUTE_KIND, envelope_for(change), at=change.at)


class RouteQueuedEvent:
    """Outbox handler for `route_event`: route the queued envelope and record its decision."""

    def __init__(self, router: ShadowRouter):
        self.router = router

    def __call__(self, attempt: Attempt) -> Outcome:
        receipt = self.router.receive(attempt.payload)
        return Outcome.sent(receipt.decision.outcome, decision_id=receipt.decision.id)
