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


def decode_cursor(cursor: str, arity: int) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, TypeError) as exc:
        raise InvalidCursor("cursor is not one this service issued") from exc
    if not isinstance(values, list) or len(values) != arity:
        raise InvalidCursor("cursor is not one this service issued")
    if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
        raise InvalidCursor("cursor is not one this service issued")
    return values


def page_of(rows: list[Any], limit: int, key) -> tuple[list[Any], str | None]:
    """Split a query result fetched with `limit + 1` rows into the page and the cursor of the next one."""
    if len(rows) > limit:
        rows = rows[:limit]
        return rows, encode_cursor(key(rows[-1]))
    return rows, None
