"""Stored first answers for requests that carried an `Idempotency-Key` (`domain/idempotency.py`), and the rows
an answer shows, kept as their column values."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from peewee import DateTimeField, ForeignKeyField, Model

from storage import statements
from storage.models import IdempotencyRecord, stored_time


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


def row_values(model: type[Model], row: Any) -> dict[str, Any]:
    """`row` (a record of `model`, or an instance of it)'s columns as JSON values, by the name a row is read by (a
    foreign key by its id's name, `initiative_id`), a moment as its ISO 8601 text: what an answer keeps of a row."""
    values = {}
    for field in model._meta.sorted_fields:
        name = field.object_id_name if isinstance(field, ForeignKeyField) else field.name
        value = getattr(row, name)
        values[name] = value.isoformat() if isinstance(value, datetime) else value
    return values


def row_from(model: type[Model], values: dict[str, Any]) -> Any:
    """The row `row_values` kept, as a record of `model` (`statements.record_type`) with the same values, moments
    aware again; a column the values lack (an answer kept by the release before showed no ticket's `version`) is
    None."""
    row = {}
    for field in model._meta.sorted_fields:
        name = field.object_id_name if isinstance(field, ForeignKeyField) else field.name
        value = values.get(name)
        row[name] = stored_time(value) if isinstance(field, DateTimeField) and isinstance(value, str) else value
    return statements.record_type(model)(**row)
