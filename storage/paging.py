"""Opaque keyset cursors: a page costs the same however large the table grows."""

from __future__ import annotations

import base64
import json
from typing import Any

MAX_LIMIT = 500
DEFAULT_LIMIT = 50


class InvalidCursor(ValueError):
    """The cursor was not made by this service (or was cut short)."""


def encode_cursor(values: list[Any]) -> str:
    raw = json.dumps(values, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# Row ids are 64-bit integers on both databases; a larger number would overflow in the driver.
_ID_RANGE = range(-(2**63), 2**63)


def decode_cursor(cursor: str, *kinds: type) -> list[Any]:
    """The values of a cursor made by `encode_cursor`, one of each of `kinds` (`int` ids, `str` keys).

    Anything else — a cursor cut short, made by hand, or for another list — is `InvalidCursor` (a 400).
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, TypeError) as exc:
        raise InvalidCursor("cursor is not one this service issued") from exc
    if not isinstance(values, list) or len(values) != len(kinds):
        raise InvalidCursor("cursor is not one this service issued")
    for value, kind in zip(values, kinds, strict=True):
        if type(value) is not kind or (kind is int and value not in _ID_RANGE) or (kind is str and "\x00" in value):
            raise InvalidCursor("cursor is not one this service issued")
    return values


def page_of(rows: list[Any], limit: int, key) -> tuple[list[Any], str | None]:
    """Split a query result fetched with `limit + 1` rows into the page and the cursor of the next one."""
    if len(rows) > limit:
        rows = rows[:limit]
        return rows, encode_cursor(key(rows[-1]))
    return rows, None
