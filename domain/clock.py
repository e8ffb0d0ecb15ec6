"""Time, injected: every unit of work asks a `Clock` instead of reading the system time itself."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    """Now, as an aware UTC datetime."""
    return datetime.now(UTC)


def iso(value: datetime | None) -> str | None:
    """ISO 8601 UTC with a Z suffix (the contract's timestamp form), or None."""
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.isoformat(timespec="microseconds")[:-6] + "Z"  # "+00:00" is its end


def shifted(offset_seconds: float, base: Clock = system_clock) -> Clock:
    """`base` moved by a fixed offset: the jobs process rehearsing a schedule (see SVC_JOBS_CLOCK_OFFSET)."""
    if not offset_seconds:
        return base
    delta = timedelta(seconds=offset_seconds)
    return lambda: base() + delta
