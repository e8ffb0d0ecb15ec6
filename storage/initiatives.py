"""Initiative rows (served by `api/resources/initiatives.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from storage import statements
from storage.models import Initiative
from storage.paging import decode_cursor, page_of


def get(initiative_id: str, *, for_update: bool = False) -> Initiative | None:
    """The initiative, locked for the rest of the transaction on PostgreSQL when `for_update`."""
    return statements.select_one(Initiative, {"id": initiative_id}, for_update=for_update)


def exists(initiative_id: str) -> bool:
    return Initiative.select(Initiative.id).where(Initiative.id == initiative_id).exists()


def insert(**fields: Any) -> Initiative:
    return Initiative.create(**fields)


def insert_if_missing(**fields: Any) -> None:
    Initiative.insert(**fields).on_conflict_ignore().execute()


def update(initiative_id: str, changes: dict[str, Any], *, at: datetime, by: str | None) -> bool:
    query = Initiative.update(updated_at=at, updated_by=by, **changes)
    return query.where(Initiative.id == initiative_id).execute() == 1


def page(*, limit: int, cursor: str | None = None) -> tuple[list[Initiative], str | None]:
    query = Initiative.select()
    if cursor:
        (after,) = decode_cursor(cursor, str)
        query = query.where(Initiative.id > after)
    rows = list(query.order_by(Initiative.id).limit(limit + 1))
    return page_of(rows, limit, lambda i: [i.id])


def stages() -> dict[str, str]:
    """Every initiative's stage, by id."""
    return dict(Initiative.select(Initiative.id, Initiative.stage).tuples())
