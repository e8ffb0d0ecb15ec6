"""The writing ticket `WRITING-DAILY`, moved by the writing agent's notify reports.

The seed's table, one row per notify status. The prior stage never restricts the move: each event is allowed
from every stage, `done` and `cancelled` included.

| notify status        | event            | next stage | waiting_on     | chat post | the job failed |
|----------------------|------------------|------------|----------------|-----------|----------------|
| `SKIP_ALL_CAUGHT_UP` | `caught_up`      | `done`     | none           | no        | no             |
| `BACKFILL_READY`     | `backfill_ready` | `execute`  | `agent`        | yes       | no             |
| `STOP_NEED_TOPICS`   | `need_topics`    | `queued`   | `topic_refill` | yes       | no             |
| `SUCCESS`            | `published`      | `done`     | none           | yes       | no             |
| `FAIL_*`             | `failed`         | `execute`  | `agent_failed` | yes       | yes            |
| `AUTOMATION_DISABLED`| (none)           | unchanged  | unchanged      | no        | no             |

Every notify moves this ticket, so the move is on the service's hot path, where python-statemachine's engine
cost more than the rest of a notify's work. The machine stays the one declaration of the moves: at start-up
`transitions()` runs it once for every stage and event and keeps what it did as a table, which `apply_report`
reads; a test holds the table to the machine for every stage, prior `waiting_on` and event.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Protocol

from statemachine import StateMachine
from statemachine.states import States

from machines.errors import TransitionForbidden
from machines.stages import Stage

FAILURE_STATUS = re.compile(r"^FAIL_[A-Z0-9_]+$")
AUTOMATION_DISABLED = "AUTOMATION_DISABLED"


@dataclass(frozen=True)
class NotifyMove:
    event: str | None
    stage: str | None
    waiting_on: str | None
    chat: bool
    failed: bool = False


NOTIFY_MOVES: dict[str, NotifyMove] = {
    "SKIP_ALL_CAUGHT_UP": NotifyMove("caught_up", "done", None, chat=False),
    "BACKFILL_READY": NotifyMove("backfill_ready", "execute", "agent", chat=True),
    "STOP_NEED_TOPICS": NotifyMove("need_topics", "queued", "topic_refill", chat=True),
    "SUCCESS": NotifyMove("published", "done", None, chat=True),
    "FAIL_*": NotifyMove("failed", "execute", "agent_failed", chat=True, failed=True),
    AUTOMATION_DISABLED: NotifyMove(None, None, None, chat=False),
}


def notify_move(status: str) -> NotifyMove:
    """The row of the table for `status`; every `FAIL_...` status shares the `FAIL_*` row."""
    if FAILURE_STATUS.match(status):
        return NOTIFY_MOVES["FAIL_*"]
    try:
        return NOTIFY_MOVES[status]
    except KeyError:
        raise ValueError(f"unknown writing status {status!r}") from None


class WritingTicketLike(Protocol):
    stage: str
    waiting_on: str | None


class WritingTicket(StateMachine):
    # Every board stage is a state, because the ticket may sit in any of them when a report arrives; none is
    # final, since a report moves the ticket out of done and cancelled too.
    stages = States.from_enum(Stage, initial=Stage.agreement, use_enum_instance=False)

    caught_up = stages.done.from_.any()
    backfill_ready = stages.execute.from_.any()
    need_topics = stages.queued.from_.any()
    published = stages.done.from_.any()
    failed = stages.execute.from_.any()

    # Stages no report leads to (ci, human_test, ...) are still valid places to be moved *from*.
    validate_disconnected_states = False

    def __init__(self, ticket: WritingTicketLike, **kwargs):
        super().__init__(ticket, state_field="stage", **kwargs)

    def on_transition(self, event: str, model: WritingTicketLike) -> None:
        model.waiting_on = _WAITING_ON_AFTER[event]


_WAITING_ON_AFTER = {move.event: move.waiting_on for move in NOTIFY_MOVES.values() if move.event}


@dataclass(frozen=True)
class Moved:
    """Where the machine leaves a ticket after an event."""

    stage: str
    waiting_on: str | None


@dataclass
class _Model:
    stage: str
    waiting_on: str | None


@functools.cache
def transitions() -> dict[tuple[str, str], Moved]:
    """(stage, event) -> where `WritingTicket` leaves the ticket, for every pair the machine allows: derived by
    running the machine itself (once per process, at start-up), so it cannot say anything the machine does not."""
    model = _Model(WritingTicket.initial_state.value, None)
    machine = WritingTicket(model)
    table: dict[tuple[str, str], Moved] = {}
    for state in WritingTicket.states:
        for event in WritingTicket.events:
            # The machine reads its model's state on every send, so one instance serves every starting stage.
            model.stage, model.waiting_on = state.value, None
            try:
                machine.send(event.id)
            except WritingTicket.TransitionNotAllowed:
                continue
            table[(state.value, event.id)] = Moved(model.stage, model.waiting_on)
    return table


def apply_report(ticket: WritingTicketLike, move: NotifyMove) -> tuple[str, str]:
    """Move `ticket` (in place) as a report's row of the table (`notify_move(status)`) says; return (from_stage,
    to_stage)."""
    before = ticket.stage
    if move.event is None:
        return before, before
    moved = transitions().get((before, move.event))
    if moved is None:  # only if the table and the machine disagree, or the stage is not one of the board's
        raise TransitionForbidden(f"{move.event} is not allowed from {before!r}", current=before, event=move.event)
    ticket.stage, ticket.waiting_on = moved.stage, moved.waiting_on
    return before, ticket.stage
