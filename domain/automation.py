"""Reading the writing automation toggle of `machines/automation.py` (on by default)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from machines.automation import DEFAULT_ENABLED
from machines.stages import WRITING_TICKET_KEY
from storage import settings
from storage.models import Ticket

SETTING_KEY = "writing.automation"


@dataclass(frozen=True)
class AutomationState:
    enabled: bool
    updated_at: datetime | None
    updated_by: str | None


def state() -> AutomationState:
    """The writing automation setting, with who changed it last and when (never changed: on, by no one)."""
    row = settings.get(SETTING_KEY)
    if row is None:
        return AutomationState(DEFAULT_ENABLED, None, None)
    return AutomationState(bool(row.value.get("enabled", DEFAULT_ENABLED)), row.updated_at, row.updated_by)


def is_enabled() -> bool:
    return state().enabled


# The one Needs-you rule that depends on a setting rather than on the ticket (the rest is
# `machines.stages.needs_you`): while writing automation is off, the writing ticket leaves the list.


def hidden_from_needs_you() -> tuple[str, ...]:
    """Ticket keys the Needs-you list leaves out right now."""
    return () if is_enabled() else (WRITING_TICKET_KEY,)


def shown(rows: list[Ticket]) -> list[Ticket]:
    """`rows` as people see them: a hidden ticket's `needs_you` reads false (in memory; nothing is written)."""
    # Only a writing ticket that would be on the list can be hidden: for any other row, nothing to read.
    hidden = hidden_from_needs_you() if any(r.key == WRITING_TICKET_KEY and r.needs_you for r in rows) else ()
    for row in rows:
        if row.key in hidden:
            row.needs_you = False
    return rows
