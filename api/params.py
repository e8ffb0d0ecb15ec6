"""Query parameters, checked: a bad value is a 400 naming the parameter, and so is a parameter the operation does
not declare (`Operation.params`, which the OpenAPI document shows).

An empty value (`?stage=`, what an HTML form sends for an unset filter) is read as an absent parameter, for
every optional query parameter alike; the OpenAPI document says so with `allowEmptyValue`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from datetime import datetime

import falcon

from domain import clock
from domain.errors import InvalidQuery, NotFound
from storage.paging import DEFAULT_LIMIT, MAX_LIMIT


def limit(req: falcon.Request) -> int:
    raw = req.get_param("limit")
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    try:
        value = int(raw)
    except ValueError:
        raise InvalidQuery("limit", f"expected a whole number from 1 to {MAX_LIMIT}, got {raw!r}") from None
    if not 1 <= value <= MAX_LIMIT:
        raise InvalidQuery("limit", f"expected a whole number from 1 to {MAX_LIMIT}, got {value}")
    return value


def cursor(req: falcon.Request) -> str | None:
    return req.get_param("cursor") or None


def choice(req: falcon.Request, name: str, options) -> str | None:
    raw = req.get_param(name)
    if raw is None or raw == "":
        return None
    if raw not in options:
        raise InvalidQuery(name, f"expected one of {', '.join(sorted(options))}, got {raw!r}")
    return raw


def boolean(req: falcon.Request, name: str) -> bool | None:
    raw = req.get_param(name)
    if raw is None or raw == "":
        return None
    lowered = raw.lower()
    if lowered in {"true", "1", "yes"}:
        return True
    if lowered in {"false", "0", "no"}:
        return False
    raise InvalidQuery(name, f"expected true or false, got {raw!r}")


def text(req: falcon.Request, name: str, *, max_length: int = 200) -> str | None:
    raw = req.get_param(name)
    if raw is None or raw == "":
        return None
    if len(raw) > max_length:
        raise InvalidQuery(name, f"longer than {max_length} characters")
    return raw


def timestamp(req: falcon.Request, name: str) -> datetime | None:
    """An ISO 8601 timestamp with a zone (`2026-11-20T08:00:00Z`), as an aware UTC datetime."""
    raw = req.get_param(name)
    if raw is None or raw == "":
        return None
    return parse_timestamp(name, raw)


def parse_timestamp(name: str, raw: str) -> datetime:
    """`raw` as the value of query parameter `name`: see `timestamp`."""
    try:
        return clock.parse_timestamp(raw)
    except clock.BadTimestamp as exc:
        raise InvalidQuery(name, _TIMESTAMP_REFUSALS[exc.problem].format(raw=raw)) from None


_TIMESTAMP_REFUSALS = {
    clock.BadTimestamp.NOT_ISO: "expected an ISO 8601 timestamp such as 2026-11-20T08:00:00Z, got {raw!r}",
    clock.BadTimestamp.NO_ZONE: "the timestamp needs a zone (Z or +hh:mm), got {raw!r}",
    clock.BadTimestamp.OUT_OF_RANGE: "the timestamp is out of range, got {raw!r}",
}


class UnknownParameters(Exception):
    """Query parameters the operation does not take. A misspelled filter read as absent answers everything, which
    looks right and is not (`?subject=PORT-12` for `subject_id`), so it is refused, naming the nearest it takes."""

    def __init__(self, unknown: Iterable[str], known: Iterable[str]):
        self.unknown = tuple(unknown)
        self.known = tuple(sorted(known))
        super().__init__(self.detail())

    def hint(self, name: str) -> str:
        nearest = difflib.get_close_matches(name, self.known, n=1)
        if nearest:
            return f"did you mean {nearest[0]!r}?"
        if not self.known:
            return "this takes no query parameters"
        return f"this takes {', '.join(self.known)}"

    def detail(self) -> str:
        if len(self.unknown) == 1:
            return f"unknown query parameter {self.unknown[0]!r}; {self.hint(self.unknown[0])}"
        return "unknown query parameters " + "; ".join(f"{name!r} ({self.hint(name)})" for name in self.unknown)

    def errors(self) -> list[dict[str, str]]:
        return [{"path": name, "message": f"unknown query parameter; {self.hint(name)}"} for name in self.unknown]


def refuse_unknown(req: falcon.Request, known: frozenset[str]) -> None:
    """Raise `UnknownParameters` when the query names a parameter outside `known`."""
    if not req.query_string:
        return
    unknown = [name for name in req.params if name not in known]
    if unknown:
        raise UnknownParameters(unknown, known)


# The largest job id a row can have (a 64-bit key).
_JOB_ID_MAX = 2**63 - 1


def job_id(text: str) -> int:
    """A job id from a path, the one parser of them (the API's and the board's): ASCII digits only, no sign, no
    space, no other script's digits (`" 1"`, and an Arabic-Indic one, are no job), within a 64-bit key; else
    `NotFound`."""
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or int(text) == 0 or int(text) > _JOB_ID_MAX:
        raise NotFound("job", text)
    return int(text)
