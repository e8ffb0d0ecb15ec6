"""Times as the wire writes them: ISO 8601 (a sender's answer, a person's query parameter) and HTTP-dates (a
`Date` or `Retry-After` header), the one reading of each in the service. `domain/clock.parse_timestamp` is built on
it; the database's own text is read by `storage/models.py` (`stored_time`)."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any


def iso_time(text: str) -> datetime:
    """An ISO 8601 time (`2026-11-24T10:00:00Z`, a lower-case z, or `+01:00`): naive when it names no zone. Raises
    ValueError."""
    return datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 time with its zone, as a sender's answer carries it, as aware UTC; None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = iso_time(value)
        return moment.astimezone(UTC) if moment.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None


def http_date(text: str | None) -> datetime | None:
    """An HTTP-date (`Sun, 06 Nov 1994 08:49:37 GMT`) as aware UTC; None when there is none or it is not one."""
    try:
        when = parsedate_to_datetime(text or "")
    except (TypeError, ValueError, IndexError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)  # an HTTP-date is GMT
