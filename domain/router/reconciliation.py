"""The router's side of reconciliation (the rows: `storage/reconciliation.py`; the agent: `domain/ops/reconciler.py`;
remembering each accepted delivery: `deliveries.remember`): catching up a tracker state change that never arrived,
as a `poller` envelope routed like any other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from contracts.envelope import ID_MAX_LENGTH
from domain import units
from domain.clock import Clock, iso
from domain.gaps import TRACKER_HOOK, Gap, GapState
from domain.router.evaluation import REJECTED
from domain.router.routing import Intake, Receipt
from domain.router.senders import linear
from domain.router.senders.payloads import build, ticket_subject
from integrations.linear import TrackerIssue
from storage import reconciliation
from storage import tickets as ticket_rows

RECONCILER_ACTOR = {"kind": "system", "id": "svc:reconciler"}


def ledger(*, limit: int, cursor: str | None) -> tuple[list[Gap], str | None]:
    """One page of the reconciliation ledger, newest first, and the next page's cursor."""
    rows, after = reconciliation.page(limit=limit, cursor=cursor)
    return [Gap.of(row) for row in rows], after


@dataclass(frozen=True)
class Week:
    """What the decisions page says of reconciliation: the events recovered in the last seven days, and the gaps
    given up in them (what a person must look at)."""

    recovered: int
    given_up: list[Gap]


def this_week(now: datetime, *, listed: int = 20) -> Week:
    since = now - timedelta(days=7)
    return Week(
        recovered=reconciliation.count_in_state_since(GapState.RECOVERED, since),
        given_up=[Gap.of(row) for row in reconciliation.in_state_since(GapState.GIVEN_UP, since, limit=listed)],
    )


@dataclass(frozen=True)
class CaughtUp:
    """A tracker state change the reconciler routed: the issue, the two stages and the decision it became."""

    identifier: str
    envelope_id: str
    from_stage: str | None
    to_stage: str
    decision_id: int


class TrackerCatchUp:
    """For each tracked issue Linear says changed: when its state is not the one the last tracker event about its
    ticket said (or, with none, not the ticket's stage), route a `poller` `state_changed` envelope, idempotent by
    issue and update time, and enter it in the ledger as `recovered`."""

    def __init__(self, route: Callable[[Any], Receipt], clock: Clock):
        self.route = route
        self.clock = clock

    def __call__(self, issues: list[TrackerIssue]) -> list[CaughtUp]:
        caught: list[CaughtUp] = []
        for issue in sorted(issues, key=lambda i: i.updated_at):
            envelope = self.missed(issue)
            if envelope is None:
                continue
            receipt = self.route(envelope)
            if receipt.intake is not Intake.ACCEPTED:
                continue
            transition = envelope["transition"]
            caught.append(
                CaughtUp(issue.identifier, envelope["id"], transition["from"], transition["to"], receipt.decision.id)
            )
            detail = (
                f"{issue.identifier} is {issue.state_name} in Linear, but no tracker event said so: routed as poller "
                f"decision {receipt.decision.id} ({transition['from'] or 'unknown'} → {transition['to']})"
            )
            units.run(
                lambda detail=detail, envelope=envelope: reconciliation.open_gap(
                    sender="linear",
                    hook=TRACKER_HOOK,
                    delivery=None,
                    guid=envelope["id"],
                    event="state_changed",
                    state=GapState.RECOVERED,
                    attempts=0,
                    detail=detail,
                    at=self.clock(),
                ),
                what="the reconciliation ledger",
            )
        return caught

    def missed(self, issue: TrackerIssue) -> dict[str, Any] | None:
        """The envelope of `issue`'s state change when no tracker event recorded it, else None."""
        to_stage = linear.stage_for({"name": issue.state_name, "type": issue.state_type})
        if to_stage is None:
            return None

        def read() -> tuple[Any, str | None]:
            ticket = ticket_rows.tracking(issue.id, issue.identifier)
            return ticket, (_last_tracker_stage(ticket.key) if ticket is not None else None)

        ticket, last = units.run(read, what="the tracked ticket")
        if ticket is None:
            return None
        known = last if last is not None else ticket.stage
        if known == to_stage:
            return None
        to_execute = to_stage == "execute"
        return build(
            event_id=f"reconcile:linear:{issue.id}:{issue.updated_at_text}"[:ID_MAX_LENGTH],
            occurred_at=iso(issue.updated_at),
            source="poller",
            kind="state_changed",
            from_state=known,
            to_state=to_stage,
            subject=ticket_subject(ticket),
            actor=dict(RECONCILER_ACTOR),
            eligible_for_worker=to_execute,
            suggested_role="coder" if to_execute else None,
        )


def _last_tracker_stage(key: str) -> str | None:
    """The stage the newest recorded tracker state change about ticket `key` led to (a webhook's, or one the
    reconciler caught up as `poller`; a rejected envelope changed nothing), or None when none was recorded."""
    return reconciliation.last_stage_recorded(
        key, kind="state_changed", sources=("tracker", "poller"), not_outcome=REJECTED
    )
