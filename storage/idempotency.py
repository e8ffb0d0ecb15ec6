"""Stored first answers for requests that carried an `Idempotency-Key` (`domain/idempotency.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from storage import statements
from storage.models import IdempotencyRecord


def find(scope: str, key: str) -> IdempotencyRecord | None:
    return statements.select_one(IdempotencyRecord, {"scope": scope, "key": key})


def save(scope: str, key: str, *, request_hash: str, status_code: int, response: Any, at: datetime) -> None:
    """Store the answer; a concurrent twin with the same key fails with IntegrityError and rolls back."""
    statements.insert(
        IdempotencyRecord,
        {
            "scope": scope,
            "key": key,
            "request_hash": request_hash,
            "status_code": status_code,
            "response": response,
            "created_at": at,
        },
    )


def forget_older_than(cutoff: datetime) -> int:
    return IdempotencyRecord.delete().where(IdempotencyRecord.created_at < cutoff).execute()
