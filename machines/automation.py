"""The writing automation toggle's machine (`domain/automation.py` reads it): a single switch, on by default.

| state      | effect                                                                                   |
|------------|------------------------------------------------------------------------------------------|
| `enabled`  | the scheduled catch-up job runs; ticket, agents strip and chat update                    |
| `disabled` | the job reports `AUTOMATION_DISABLED` and does nothing; `WRITING-DAILY` leaves Needs-you |

Both events are allowed from both states, so setting the value it already has is a harmless repeat.
"""

from __future__ import annotations

from typing import Protocol

from statemachine import State, StateMachine


class ToggleLike(Protocol):
    state: str


class WritingAutomation(StateMachine):
    enabled = State(initial=True)
    disabled = State()

    turn_on = enabled.from_(enabled, disabled)
    turn_off = disabled.from_(enabled, disabled)


DEFAULT_ENABLED = True


def switch(toggle: ToggleLike, enabled: bool) -> tuple[bool, bool]:
    """Set the toggle (in place); return (was_enabled, is_enabled)."""
    machine = WritingAutomation(toggle)
    before = toggle.state == "enabled"
    machine.send("turn_on" if enabled else "turn_off")
    return before, toggle.state == "enabled"
