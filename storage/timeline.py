"""Timeline entry rows (`api/web/timeline.py` shows them): one per action on a ticket (receipts, stage changes,
releases, tracker results)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from storage import statements
from storage.models import TimelineEntry
from storage.paging import decode_cursor, page_of


def append(
    ticket_key: str, *, kind: str, summary: str, at: datetime, data: dict[str, Any] | None = None
) -> TimelineEntry:
    return statements.insert(
        TimelineEntry, {"ticket": ticket_key, "at": at, "kind": kind, "summary": summary, "data": data}
    )


def newest(ticket_key: str, count: int) -> list[TimelineEntry]:
    return list(
        TimelineEntry.select().where(TimelineEntry.ticket == ticket_key).order_by(TimelineEntry.id.desc()).limit(count)
    )


def page(ticket_key: str, *, limit: int, cursor: str | None = None) -> tuple[list[TimelineEntry], str | None]:
    query = TimelineEntry.select().where(TimelineEntry.ticket == ticket_key)
    if cursor:
        (before,) = decode_cursor(cursor, int)
        query = query.where(TimelineEntry.id < before)
    rows = list(query.order_by(TimelineEntry.id.desc()).limit(limit + 1))
    return page_of(rows, limit, lambda e: [e.id])
