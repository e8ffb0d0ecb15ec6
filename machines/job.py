"""A dispatch job's lifecycle (`domain/dispatch/jobs.py` runs it; the rows: `storage/jobs.py`).

| from      | to (event)                                                                                        |
|-----------|---------------------------------------------------------------------------------------------------|
| (new)     | `queued` (a live rule's passing decision), or `held` (`hold`: the same while dispatch is paused)   |
| `held`    | `queued` (`release`: dispatch resumed), `cancelled` (`cancel`)                                     |
| `queued`  | `running` (`claim`: a worker in a bay), `cancelled` (`cancel`)                                     |
| `running` | `succeeded` (`succeed`: its output passed the gate), `failed` (`fail`: refused, said it failed, or |
|           | its lease ran out too often), `queued` (`put_back`: its lease ran out), `cancelled` (`cancel`)     |

`succeeded`, `failed` and `cancelled` are final: a job that ended is run again only as a new job (`POST
dispatch/jobs/{id}/retry`, `retry_of` the old one), from a final state `RETRYABLE` names.

Every change of a job's state fires an event here; what the rest of the service needs to know about the states
(which are final, which a claim may take, which mean "a worker is on it", which a cancel may stop) is derived from
this declaration (`transitions()`, `ACTIVE`, `CANCELLABLE`), and a test holds each to the machine.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from statemachine import State, StateMachine

from machines.errors import TransitionForbidden

QUEUED, HELD, RUNNING = "queued", "held", "running"
SUCCEEDED, FAILED, CANCELLED = "succeeded", "failed", "cancelled"


class JobMachine(StateMachine):
    queued = State(QUEUED, value=QUEUED, initial=True)
    held = State(HELD, value=HELD)
    running = State(RUNNING, value=RUNNING)
    succeeded = State(SUCCEEDED, value=SUCCEEDED, final=True)
    failed = State(FAILED, value=FAILED, final=True)
    cancelled = State(CANCELLED, value=CANCELLED, final=True)

    hold = held.from_(queued)
    release = queued.from_(held)
    claim = running.from_(queued)
    put_back = queued.from_(running)
    succeed = succeeded.from_(running)
    fail = failed.from_(running)
    cancel = cancelled.from_(held, queued, running)


# Every state, in the order a person reads a job's life (and the API's enum lists them).
STATES: tuple[str, ...] = tuple(state.value for state in JobMachine.states)
FINAL: frozenset[str] = frozenset(state.value for state in JobMachine.states if state.final)
# A job a worker is on, or will be as soon as one claims it: its ticket is not needs-you while it has one.
ACTIVE: frozenset[str] = frozenset({QUEUED, RUNNING})
# What an operator may run again as a new job: a job that ended without its output being accepted.
RETRYABLE: frozenset[str] = frozenset({FAILED, CANCELLED})


@dataclass
class _Model:
    state: str


@functools.cache
def transitions() -> dict[tuple[str, str], str]:
    """(state, event) -> the state the machine leaves a job in, for every pair it allows: derived once by running
    the machine itself, so that firing an event costs a lookup (a job moves on every claim and heartbeat's end)."""
    model = _Model(QUEUED)
    table: dict[tuple[str, str], str] = {}
    for state in JobMachine.states:
        for event in JobMachine.events:
            model.state = state.value
            machine = JobMachine(model, state_field="state")
            try:
                machine.send(event.id)
            except JobMachine.TransitionNotAllowed:
                continue
            table[(state.value, event.id)] = model.state
    return table


def fire(state: str, event: str) -> str:
    """The state a job in `state` is in after `event`; `TransitionForbidden` naming the current state when the
    machine does not allow it."""
    found = transitions().get((state, event))
    if found is None:
        raise TransitionForbidden(f"cannot {event.replace('_', ' ')} a job that is {state}", current=state, event=event)
    return found


def allows(state: str, event: str) -> bool:
    return (state, event) in transitions()


def first_state(*, paused: bool) -> str:
    """The state a new job starts in: queued, or held while dispatch is paused."""
    return fire(QUEUED, "hold") if paused else QUEUED


# Where a cancel can stop a job (held, queued and running ones).
CANCELLABLE: frozenset[str] = frozenset(state for state, event in transitions() if event == "cancel")
