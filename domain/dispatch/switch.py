"""The switch over live dispatch: paused, nothing is dispatched and nothing is claimed.

A stand-in with the interface helper E's module has (the lead keeps E's at merge): the setting "dispatch",
value {"paused", "reason"}, with who changed it and when.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from domain import units
from domain.clock import Clock
from storage import settings

KEY = "dispatch"


@dataclass(frozen=True)
class Switch:
    paused: bool
    reason: str | None
    changed_by: str | None
    changed_at: datetime | None


def read() -> Switch:
    """The switch as stored (inside a unit of work or a connection); not paused when never set."""
    row = settings.get(KEY)
    if row is None:
        return Switch(False, None, None, None)
    value = row.value or {}
    return Switch(bool(value.get("paused")), value.get("reason"), row.updated_by, row.updated_at)


def set(*, paused: bool, reason: str | None, actor: str | None, clock: Clock) -> Switch:
    """Store the switch, in a unit of work of its own, and return it."""

    def work() -> Switch:
        now = clock()
        settings.put(KEY, {"paused": paused, "reason": reason}, at=now, by=actor)
        return Switch(paused, reason, actor, now)

    return units.run(work, what="setting the dispatch switch")
