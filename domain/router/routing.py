"""`Router`: the unit of work behind `POST events` and the webhooks, the board's own events and the poller.

For each envelope, in one transaction: validate it (a broken one is recorded as `rejected`); if its event id
was accepted before, answer with that decision and record nothing; else read the policy in force (the database's,
`domain/policy/in_force.py`), run its rules and every gate against the live board and record one decision,
with the policy and the rule that matched. A live rule's decision that passed every gate, and names a role,
queues one job for a worker in the same transaction (`domain/dispatch/jobs.py`; held while dispatch is paused); a
redelivered event records no second decision, so it never queues a second job. Then the event moves its ticket's
pull request's ticket, if it is about one (`domain/dispatch/pull_requests.py`), whether its rule is live or not.

The service's own events (`evaluation.is_own`: its board events by a system or agent actor, the forge events its own
forge account sent) are recorded with outcome `own`: no evidence on the scorecard, never dispatched, still moving
their ticket.

`record_only` is the one switch for history that must be recorded and never acted on (`svc import`): each envelope
is routed as if it had arrived at its `occurred_at` (no later than now). Its decision is evaluated then (the gates
read the board as it is now; `fresh` judges the event at its own time), recorded and judged on the scorecard as any
other's: it takes up earlier decisions as a live event would, and is taken up by the later events already recorded.
The scorecard's kept days from the earliest such moment are dropped, to be counted again. Nothing is dispatched,
no ticket moves, nothing is written to a forge.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from contracts.envelope import ID_MAX_LENGTH, KINDS, SOURCES, SUBJECT_ID_MAX_LENGTH, envelope_violations
from domain import units
from domain.board import Board
from domain.clock import Clock, parse_timestamp
from domain.config import Config
from domain.dispatch.forge import OwnForgeUsers
from domain.dispatch.jobs import Dispatch
from domain.dispatch.pull_requests import PullRequestLoop
from domain.policy.document import Policy
from domain.policy.in_force import PolicyInForce
from domain.policy.rules import LIVE, SHADOW
from domain.router import deliveries, scorecard
from domain.router.backtest import Report, backtest
from domain.router.board_view import BoardView, LiveBoardView, RecordingBoardView, TicketState, UnmovedBoardView
from domain.router.evaluation import OUTCOMES as OUTCOMES  # declared there; the router's readers take it here
from domain.router.evaluation import OWN, REJECTED, WOULD_DISPATCH, evaluate, is_own
from domain.router.senders.payloads import Unmappable
from domain.router.ticket_keys import KnownTicketKeys
from integrations.forges import Forge
from storage import decisions
from storage import tickets as ticket_rows
from storage.models import RouterDecision, Ticket

log = logging.getLogger("svc.router")

# A rejected envelope's mode, and a decision's when no rule matched; otherwise it is its rule's mode.
MODE = SHADOW


class Intake(enum.Enum):
    """What became of one envelope: accepted now, a duplicate of an event accepted before (its decision is the
    earlier one), or rejected for its violations (recorded as a `rejected` decision, which holds them)."""

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"


@dataclass(frozen=True)
class Receipt:
    """What became of one envelope, the event id it goes by, and its decision (None only for a duplicate whose
    decision the archivist has moved out)."""

    intake: Intake
    event_id: str | None
    decision: RouterDecision | None


@dataclass(frozen=True)
class Ignored:
    """A delivery that maps to no event; nothing was recorded."""

    reason: str
    delivery: str | None


class Router:
    def __init__(
        self,
        config: Config,
        clock: Clock,
        *,
        board: Board,
        forges: dict[str, Forge],
    ):
        """`board` is the one `domain/services.py`'s `build_services` wires (live dispatch, `self.dispatch`, among its
        listeners); `forges` are the forge adapters, built once by the caller: who the service is on each."""
        self.config = config
        self.clock = clock
        # The database's policy in force, read per event; the environment's first policy until one is stored.
        self.policy = PolicyInForce(Policy.from_config(config))
        self.view = LiveBoardView()
        self.known_keys = KnownTicketKeys(config.ticket_prefixes)
        self.board = board
        self.dispatch = Dispatch(config, clock, self.board, policy=self.policy)
        self.loop = PullRequestLoop(config, clock, self.board, self.dispatch)
        self.own = OwnForgeUsers(forges)

    # -- intake ------------------------------------------------------------------------------------------

    def receive(self, document: Any, *, record_only: bool = False) -> Receipt:
        """Route one envelope in its own transaction (`record_only`: at its `occurred_at`, record and judge it, act
        on nothing)."""
        return self.receive_batch([document], record_only=record_only)[0]

    def receive_batch(self, documents: list[Any], *, record_only: bool = False) -> list[Receipt]:
        """Route a batch in order, in one transaction: all of it is recorded, or (on a crash) none of it.

        Each envelope is judged as it would be alone, and sees the decisions of those before it (a second
        pipeline_failed counts the first one's fixer dispatch; a repeated id is a duplicate).
        """
        for document in documents:
            self._learn_own(document)

        def work() -> list[Receipt]:
            if not record_only:
                return [self._route(d) for d in documents]
            # Nothing a record-only batch does changes the board or the policy: both are read once for the batch
            # (as it is now), in this attempt of the unit of work.
            board, policy = UnmovedBoardView(self.view), self.policy()
            receipts = [self._route(d, record_only=True, board=board, policy=policy) for d in documents]
            # Recorded in the past: the scorecard's kept days from there on are counted again.
            accepted = [r.decision.evaluated_at for r in receipts if r.intake is Intake.ACCEPTED]
            if accepted:
                scorecard.forget_days_from(min(accepted))
            return receipts

        return units.run(work, what="routing the event" if len(documents) == 1 else "routing the batch")

    def _learn_own(self, document: Any) -> None:
        """Before the unit of work (an outbound call never sits in a transaction): who the service is on the forge a
        forge event came from, asked once."""
        if isinstance(document, dict) and document.get("source") == "forge":
            actor = document.get("actor")
            ident = actor.get("id") if isinstance(actor, dict) else None
            if isinstance(ident, str) and ":" in ident:
                self.own.learn(ident.split(":", 1)[0])

    def receive_delivery(self, delivery: deliveries.Delivery) -> Receipt | Ignored:
        """Normalize a signed webhook delivery and route its envelope.

        Raises `StaleDelivery` when the sender signed a time outside the replay window (before anything is
        read or written) and `PayloadError` when the payload is malformed. A delivery that is the same event
        as one accepted before (see `deliveries.identify`) answers with that event's decision."""
        deliveries.check_fresh(delivery, now=self.clock(), tolerance=self.config.webhook_tolerance_seconds)
        identity = deliveries.identify(delivery)
        if delivery.endpoint == "forge":
            self.own.learn(delivery.sender)

        def work() -> Receipt | Ignored:
            # Every delivery answered 2xx (a duplicate, an ignored one too) is remembered by its id, so the
            # reconciler never asks its sender for it again.
            try:
                envelope = deliveries.normalize(delivery, identity, known=self.known_keys, lookup=_tracked_ticket)
            except Unmappable as exc:
                deliveries.remember(delivery, None, at=self.clock())
                return Ignored(str(exc), delivery.delivery_id)
            receipt = self._route(envelope, same_event=identity.same_event)
            if receipt.intake is not Intake.REJECTED:
                deliveries.remember(delivery, receipt.decision.id if receipt.decision else None, at=self.clock())
            return receipt

        return units.run(work, what="routing the delivery")

    # -- the one path every envelope takes ---------------------------------------------------------------

    def _route(
        self,
        document: Any,
        *,
        same_event: str | None = None,
        record_only: bool = False,
        board: BoardView | None = None,
        policy: Policy | None = None,
    ) -> Receipt:
        """`same_event` is what makes a redelivery the same event (a webhook's, see `deliveries.identify`);
        for an envelope it is its id. `record_only`: evaluated at its `occurred_at` (never later than now); nothing
        is dispatched and no ticket moves. `board` and `policy` are the batch's, when it read them once; else the
        board as it is now and the policy in force are read for this event."""
        now = self.clock()
        found = envelope_violations(document)
        if found:
            row = decisions.record(
                event_id=_text(document, ("id",), ID_MAX_LENGTH),
                evaluated_at=now,
                mode=MODE,
                source=_choice(document, ("source",), SOURCES),
                kind=_choice(document, ("transition", "kind"), KINDS),
                subject_id=_text(document, ("subject", "id"), SUBJECT_ID_MAX_LENGTH),
                outcome=REJECTED,
                role=None,
                gates=[],
                envelope=document,
                errors=[v.as_dict() for v in found],
                dispatched=False,
            )
            log.info("event rejected", extra={"decision_id": row.id, "violations": len(found)})
            return Receipt(Intake.REJECTED, row.event_id, row)
        event_id = document["id"]
        same_event = same_event or event_id
        seen, earlier = decisions.accepted(same_event)
        if seen:
            # The event's own id, as first recorded: a replay under another delivery id answers with it. Its decision
            # may be in the archive by now: still the same event, answered without it.
            return Receipt(Intake.DUPLICATE, earlier.event_id if earlier else event_id, earlier)
        if record_only:
            # As if it had arrived when it occurred (an event cannot arrive before it occurs: one from the future
            # is taken as arriving now).
            now = min(now, parse_timestamp(document["occurred_at"]))
        own = is_own(document, self.own.ids())
        taken_up = () if own else scorecard.roles_taken_up_by(document)
        if taken_up:
            scorecard.record_signal(document["subject"]["id"], taken_up, at=now)
        view = RecordingBoardView(board if board is not None else self.view)
        policy = policy if policy is not None else self.policy()
        result = evaluate(document, view, policy, now=now, own=own, max_age=self.config.dispatch_max_age_seconds)
        rule = result.rule
        row = decisions.record(
            event_id=event_id,
            evaluated_at=now,
            mode=rule.mode if rule is not None else MODE,
            source=document["source"],
            kind=document["transition"]["kind"],
            subject_id=document["subject"]["id"],
            outcome=result.outcome,
            role=result.role,
            gates=result.gates,
            envelope=document,
            errors=None,
            policy=policy.recorded,
            facts=view.facts_dict(),
            rule=rule.name if rule is not None else None,
            dispatched=False,
        )
        if (
            not record_only
            and rule is not None
            and rule.mode == LIVE
            and result.outcome == WOULD_DISPATCH
            and document["subject"]["type"] == "ticket"
        ):
            forge = document.get("forge")
            queued = self.dispatch.queue(
                decision_id=row.id,
                event_id=event_id,
                ticket=row.subject_id,
                role=result.role,
                rule=rule.name,
                head_sha=forge.get("head_sha") if isinstance(forge, dict) else None,
                at=now,
            )
            row.job_id, row.dispatched, row.held = queued.job_id, not queued.held, queued.held
        scorecard.record_decision(
            decision_id=row.id,
            subject_id=row.subject_id if document["subject"]["type"] == "ticket" else None,
            role=result.role,
            outcome=result.outcome,
            gates=result.gates,
            at=now,
            rule=rule,
            past=record_only,
        )
        # A twin routed at the same moment loses here (IntegrityError) and is retried into the branch above.
        decisions.accept(same_event, row, at=now, alias=event_id)
        if not record_only:
            self.loop.follow(document, outcome=result.outcome, decision_id=row.id)
        return Receipt(Intake.ACCEPTED, event_id, row)

    # -- reading -----------------------------------------------------------------------------------------

    def backtest(
        self,
        knobs: dict[str, Any],
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        list_at_most: int | None = None,
    ) -> Report:
        """Every recorded decision in the range under the policy in force with the members of `knobs` (a partial
        policy document) changed; writes nothing."""
        candidate = self.policy().changed(**knobs)
        return backtest(
            candidate,
            since=since,
            until=until,
            list_at_most=list_at_most,
            max_age=self.config.dispatch_max_age_seconds,
        )

    def scorecard(
        self, *, since: datetime | None = None, until: datetime | None = None, window_seconds: int = 86400
    ) -> scorecard.Scorecard:
        """Agreement of the recorded decisions with what the team then did (`domain/router/scorecard.py`)."""
        return scorecard.scorecard(now=self.clock(), since=since, until=until, window=timedelta(seconds=window_seconds))

    def decision(self, decision_id: int) -> RouterDecision | None:
        return decisions.get(decision_id)

    def decisions_with_ids(self, ids: list[int]) -> list[RouterDecision]:
        return decisions.by_ids(ids)

    def decisions_behind(
        self, key: str, *, since: datetime | None, until: datetime | None, window_seconds: int
    ) -> list[int]:
        return scorecard.decisions_behind(
            key, now=self.clock(), since=since, until=until, window=timedelta(seconds=window_seconds)
        )

    def decisions(
        self,
        *,
        limit: int,
        cursor: str | None,
        outcome: str | None,
        source: str | None,
        subject_id: str | None,
        since: datetime | None,
        include_own: bool = False,
    ) -> tuple[list[RouterDecision], str | None]:
        """Decisions newest first; the service's own (`own`) only when asked to include them, or asked for by their
        outcome."""
        return decisions.page(
            limit=limit,
            cursor=cursor,
            outcome=outcome,
            source=source,
            subject_id=subject_id,
            since=since,
            exclude_outcome=None if include_own or outcome == OWN else OWN,
        )


def _tracked_ticket(issue_id: str, identifier: str) -> TicketState | None:
    row: Ticket | None = ticket_rows.tracking(issue_id, identifier)
    return TicketState(row.key, row.stage, row.initiative_id) if row is not None else None


def _dig(document: Any, path: tuple[str, ...]) -> Any:
    for step in path:
        if not isinstance(document, dict):
            return None
        document = document.get(step)
    return document


def _text(document: Any, path: tuple[str, ...], limit: int) -> str | None:
    value = _dig(document, path)
    return value if isinstance(value, str) and 0 < len(value) <= limit else None


def _choice(document: Any, path: tuple[str, ...], options: tuple[str, ...]) -> str | None:
    value = _dig(document, path)
    return value if value in options else None
