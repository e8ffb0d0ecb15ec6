"""What became of the forge write of a job (its `forge.state`; `domain/dispatch/forge.py` runs it).

| from      | to (event)                                                                                          |
|-----------|-----------------------------------------------------------------------------------------------------|
| `none`    | `pending` (`queue`: an output with changes was accepted), `held` (`hold`: the same while paused)     |
| `held`    | `pending` (`release`: dispatch resumed), `dropped` (`drop`: its ticket was finished meanwhile)       |
| `pending` | `written` (`write`), `failed` (`fail`: refused, or given up), `held` (`hold`: paused before it went  |
|           | out), `dropped` (`drop`: its job or ticket was cancelled or finished before it went out)             |
| `failed`  | `pending` (`retry`: an operator's `POST dispatch/jobs/{id}/forge/retry`), `dropped` (`drop`)         |

`written` and `dropped` are final. A job whose output had nothing to write stays `none`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from statemachine import State, StateMachine

from machines.errors import TransitionForbidden

NONE, HELD, PENDING, WRITTEN, FAILED, DROPPED = "none", "held", "pending", "written", "failed", "dropped"


class ForgeWriteMachine(StateMachine):
    none = State(NONE, value=NONE, initial=True)
    held = State(HELD, value=HELD)
    pending = State(PENDING, value=PENDING)
    failed = State(FAILED, value=FAILED)
    written = State(WRITTEN, value=WRITTEN, final=True)
    dropped = State(DROPPED, value=DROPPED, final=True)

    queue = pending.from_(none)
    hold = held.from_(none, pending)
    release = pending.from_(held)
    write = written.from_(pending)
    fail = failed.from_(pending)
    retry = pending.from_(failed)
    drop = dropped.from_(held, pending, failed)


STATES: tuple[str, ...] = tuple(state.value for state in ForgeWriteMachine.states)
FINAL: frozenset[str] = frozenset(state.value for state in ForgeWriteMachine.states if state.final)


@dataclass
class _Model:
    state: str


@functools.cache
def transitions() -> dict[tuple[str, str], str]:
    """(state, event) -> the state after it, for every pair the machine allows (derived once from the machine)."""
    model = _Model(NONE)
    table: dict[tuple[str, str], str] = {}
    for state in ForgeWriteMachine.states:
        for event in ForgeWriteMachine.events:
            model.state = state.value
            machine = ForgeWriteMachine(model, state_field="state")
            try:
                machine.send(event.id)
            except ForgeWriteMachine.TransitionNotAllowed:
                continue
            table[(state.value, event.id)] = model.state
    return table


def fire(state: str, event: str) -> str:
    """The forge write's state after `event`; `TransitionForbidden` when the machine does not allow it."""
    found = transitions().get((state, event))
    if found is None:
        raise TransitionForbidden(f"cannot {event} a forge write that is {state}", current=state, event=event)
    return found


def allows(state: str, event: str) -> bool:
    return (state, event) in transitions()


def first_state(*, paused: bool) -> str:
    """What an accepted output's forge write starts as: pending, or held while dispatch is paused."""
    return fire(NONE, "hold" if paused else "queue")
