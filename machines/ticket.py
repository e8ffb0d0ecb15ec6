"""The generic ticket machine: the stages of a delivery board and the moves between them.

| from          | to (event)                                                              |
|---------------|-------------------------------------------------------------------------|
| `agreement`   | `queued` (queue)                                                        |
| `queued`      | `execute` (start), `blocked` (block)                                    |
| `execute`     | `ci` (submit_to_ci), `queued` (queue), `blocked` (block)                |
| `ci`          | `execute` (start), `human_test` (request_test), `blocked` (block)       |
| `human_test`  | `human_merge` (request_merge), `execute` (start), `blocked` (block)     |
| `human_merge` | `ship` (approve_ship), `execute` (start), `blocked` (block)             |
| `ship`        | `done` (complete), `blocked` (block)                                    |
| `blocked`     | `queued` (queue), `execute` (start)                                     |
| any live      | `done` (mark_done), `cancelled` (cancel)                                |

Two more moves are the forge's, never a person's `move` (`MOVE_EVENTS` does not lead to them), made when the
ticket follows its pull request (`domain/dispatch/pull_requests.py`):

| from                                      | to (event)                                           |
|-------------------------------------------|------------------------------------------------------|
| `execute`, `human_test`, `human_merge`    | `ci` (new_push: a new push to its pull request)      |
| `execute`, `ci`, `human_test`, `human_merge` | `ship` (merged: a person merged it on the forge)  |

`done` and `cancelled` are final. `WRITING-DAILY` is moved by writing notify reports alone
(`machines.writing_ticket`), so every event here refuses it.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Protocol

from statemachine import StateMachine
from statemachine.states import States

from machines import reuse
from machines.errors import TransitionForbidden
from machines.stages import FINAL_STAGES, LIVE_STAGES, WRITING_TICKET_KEY, Stage

_board = {"validators": "moved_by_the_board"}


class TicketLike(Protocol):
    key: str
    stage: str


class TicketMachine(StateMachine):
    # Every stage of the board is a state; the final ones are the vocabulary's.
    stages = States.from_enum(
        Stage, initial=Stage.agreement, final=[Stage(s) for s in sorted(FINAL_STAGES)], use_enum_instance=False
    )
    _live = operator.attrgetter(*LIVE_STAGES)(stages)

    queue = stages.queued.from_(stages.agreement, stages.execute, stages.blocked, **_board)
    start = stages.execute.from_(
        stages.queued, stages.ci, stages.human_test, stages.human_merge, stages.blocked, **_board
    )
    submit_to_ci = stages.ci.from_(stages.execute, **_board)
    request_test = stages.human_test.from_(stages.ci, **_board)
    request_merge = stages.human_merge.from_(stages.human_test, **_board)
    approve_ship = stages.ship.from_(stages.human_merge, **_board)
    new_push = stages.ci.from_(stages.execute, stages.human_test, stages.human_merge, **_board)
    merged = stages.ship.from_(stages.execute, stages.ci, stages.human_test, stages.human_merge, **_board)
    complete = stages.done.from_(stages.ship, **_board)
    block = stages.blocked.from_(
        stages.queued, stages.execute, stages.ci, stages.human_test, stages.human_merge, stages.ship, **_board
    )
    mark_done = stages.done.from_(*_live, **_board)
    cancel = stages.cancelled.from_(*_live, **_board)

    def __init__(self, ticket: TicketLike, **kwargs):
        super().__init__(ticket, state_field="stage", **kwargs)

    def moved_by_the_board(self, event: str, model: TicketLike) -> None:
        if model.key == WRITING_TICKET_KEY:
            raise TransitionForbidden(
                f"{WRITING_TICKET_KEY} is moved by writing notify reports only",
                current=model.stage,
                event=event,
            )


# The moves only a ticket's pull request makes (`domain/dispatch/pull_requests.py`): no person's `move` leads to them.
FORGE_EVENTS: tuple[str, ...] = ("new_push", "merged")

# `POST tickets/{key}/move {"to": ...}` names a target stage; this is the event that leads there.
MOVE_EVENTS: dict[str, str] = {
    "queued": "queue",
    "execute": "start",
    "ci": "submit_to_ci",
    "human_test": "request_test",
    "human_merge": "request_merge",
    "ship": "approve_ship",
    "done": "complete",
    "blocked": "block",
}


def fire(ticket: TicketLike, event: str) -> tuple[str, str]:
    """Run `event` on `ticket` (whose stage is updated in place); return (from_stage, to_stage).

    Raises `TransitionForbidden` naming the current stage when the machine does not allow it.
    """
    before = ticket.stage
    machine, holder = reuse.machine(TicketMachine)
    holder.key, holder.stage = ticket.key, ticket.stage
    try:
        machine.send(event)
    except TicketMachine.TransitionNotAllowed as exc:
        raise TransitionForbidden(
            f"cannot {event.replace('_', ' ')} a ticket in stage {before!r}", current=before, event=event
        ) from exc
    ticket.stage = holder.stage
    return before, ticket.stage


def allows(stage: str, event: str) -> bool:
    """Whether the machine has `event` from `stage` (the writing ticket aside: every event refuses it)."""
    state = TicketMachine.states_map.get(stage)
    return state is not None and any(t.event == event for t in state.transitions)


def allowed_moves(stage: str) -> list[str]:
    """The target stages `move` accepts from `stage`, in board order."""
    state = TicketMachine.states_map.get(stage)
    if state is None:
        return []
    events = {t.event for t in state.transitions}
    return [target for target, event in MOVE_EVENTS.items() if event in events]


def move_event(stage: str, target: str) -> str | None:
    """The event that moves a ticket from `stage` to `target`, if the table has one."""
    event = MOVE_EVENTS.get(target)
    return event if event is not None and target in allowed_moves(stage) else None


@dataclass(frozen=True)
class BoardMenu:
    """What a person may do to a ticket from the board: the stages `move` accepts from where it is, and
    whether `mark_done` and `cancel` are allowed."""

    moves: tuple[str, ...]
    mark_done: bool
    cancel: bool

    @property
    def empty(self) -> bool:
        return not (self.moves or self.mark_done or self.cancel)


NOTHING = BoardMenu((), False, False)


def menu(key: str, stage: str) -> BoardMenu:
    """The web board's menu for ticket `key` in `stage`, read from the machine's declared transitions, so a
    move the machine forbids is never offered. `WRITING-DAILY` gets none: `moved_by_the_board` refuses it
    every event (notify reports alone move it)."""
    return NOTHING if key == WRITING_TICKET_KEY else _menu(stage)


@functools.cache
def _menu(stage: str) -> BoardMenu:
    state = TicketMachine.states_map.get(stage)
    events = {t.event for t in state.transitions} if state is not None else set()
    return BoardMenu(tuple(allowed_moves(stage)), "mark_done" in events, "cancel" in events)
