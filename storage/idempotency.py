"""Stored first answers for requests that carried an `Idempotency-Key` (`domain/idempotency.py`), and the rows
an answer shows, kept as their column values."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from peewee import DateTimeField, ForeignKeyField, Model

from storage import statements
from storage.models import IdempotencyRecord

M = TypeVar("M", bound=Model)


def find(scope: str, key: str) -> IdempotencyRecord | None:
    return statements.select_one(IdempotencyRecord, {"scope": scope, "key": key})


def save(scope: str, key: str, *, request_hash: str, response: Any, at: datetime) -> None:
    """Store the answer; a concurrent twin with the same key fails with IntegrityError and rolls back."""
    statements.insert(
        IdempotencyRecord,
        {
            "scope": scope,
            "key": key,
            "request_hash": request_hash,
            # Only a request that succeeded keeps its answer (a refused one rolls back, key and all).
            "status_code": 200,
            "response": response,
            "created_at": at,
        },
    )


def forget_older_than(cutoff: datetime) -> int:
    return IdempotencyRecord.delete().where(IdempotencyRecord.created_at < cutoff).execute()


def row_values(row: Model) -> dict[str, Any]:
    """`row`'s columns as JSON values, by field name (a foreign key by its id's name, `initiative_id`), a moment
    as its ISO 8601 text: what an answer keeps of a row it shows."""
    values = {}
    for field in type(row)._meta.sorted_fields:
        name = field.object_id_name if isinstance(field, ForeignKeyField) else field.name
        value = getattr(row, name)
        values[name] = value.isoformat() if isinstance(value, datetime) else value
    return values


def row_from(model: type[M], values: dict[str, Any]) -> M:
    """The row `row_values` kept, as an unsaved `model` instance with the same values (moments aware again)."""
    moments = {field.name for field in model._meta.sorted_fields if isinstance(field, DateTimeField)}
    return model(
        **{
            name: datetime.fromisoformat(value) if name in moments and isinstance(value, str) else value
            for name, value in values.items()
        }
    )
