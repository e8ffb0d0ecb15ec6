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
    moment = value if value.tzinfo is UTC else value.astimezone(UTC)
    # Field by field: an answer shows several moments (a notify's, six), and `isoformat(timespec="microseconds")`,
    # whose "+00:00" must then be cut, costs 30 % more (an f-string with widths, 75 % more).
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (  # noqa: UP031 (see above)
        moment.year,
        moment.month,
        moment.day,
        moment.hour,
        moment.minute,
        moment.second,
        moment.microsecond,
    )


def shifted(offset_seconds: float, base: Clock = system_clock) -> Clock:
    """`base` moved by a fixed offset: the jobs process rehearsing a schedule (see SVC_JOBS_CLOCK_OFFSET)."""
    if not offset_seconds:
        return base
    delta = timedelta(seconds=offset_seconds)
    return lambda: base() + delta
