"""Time, injected: every unit of work asks a `Clock` instead of reading the system time itself."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from integrations.timestamps import iso_time

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


class BadTimestamp(ValueError):
    """Text that is not a moment `parse_timestamp` reads; `problem` says why, for each caller to word its own
    refusal (a query parameter's 400, the command line's exit 2)."""

    NOT_ISO = "not an ISO 8601 timestamp"
    NO_ZONE = "no zone"
    OUT_OF_RANGE = "out of range"

    def __init__(self, problem: str, text: str):
        self.problem = problem
        self.text = text
        super().__init__(f"{problem}: {text!r}")


def parse_timestamp(text: str) -> datetime:
    """An ISO 8601 timestamp with its zone (`2026-11-20T08:00:00Z`, a lower-case z, or `+01:00`) as an aware UTC
    datetime: how people and programs give the service a moment (read as the wire's, `integrations/timestamps.py`).
    Raises `BadTimestamp`."""
    try:
        value = iso_time(text)
    except ValueError:
        raise BadTimestamp(BadTimestamp.NOT_ISO, text) from None
    if value.tzinfo is None:
        raise BadTimestamp(BadTimestamp.NO_ZONE, text)
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+00:05 is before the first representable instant in UTC
        raise BadTimestamp(BadTimestamp.OUT_OF_RANGE, text) from None


def shifted(offset_seconds: float, base: Clock = system_clock) -> Clock:
    """`base` moved by a fixed offset: the jobs process rehearsing a schedule (see SVC_JOBS_CLOCK_OFFSET)."""
    if not offset_seconds:
        return base
    delta = timedelta(seconds=offset_seconds)
    return lambda: base() + delta
