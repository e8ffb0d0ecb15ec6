"""Domain errors (and `machines/errors.py`'s). The API maps each to an HTTP status in one place (`api/errors.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from contracts import ContractViolation, Violation
from machines.errors import TransitionForbidden

__all__ = [
    "Conflict",
    "ContractViolation",
    "DomainError",
    "Forbidden",
    "IdempotencyMismatch",
    "InvalidQuery",
    "NotEarned",
    "NotFound",
    "PreconditionFailed",
    "StaleDelivery",
    "TransitionForbidden",
    "Violation",
]


class DomainError(Exception):
    """Base of the errors a unit of work raises on purpose."""


class NotFound(DomainError):
    """No such ticket, initiative, slot, ..."""

    def __init__(self, what: str, ident: str, *, path: str | None = None):
        self.what = what
        self.ident = ident
        self.path = path
        super().__init__(f"no {what} {ident!r}")


class Forbidden(DomainError):
    """The caller may not have this (a worker asking for a job or ticket it never held)."""


class Conflict(DomainError):
    """The request is well formed but collides with the current state (existing key, held slot, ...)."""

    def __init__(self, message: str, *, current_stage: str | None = None):
        self.current_stage = current_stage
        super().__init__(message)


class NotEarned(DomainError):
    """A policy change would make rules live that have not earned it (`domain/router/policy_versions.judge`):
    `evidence` has, per refused rule, its numbers against the thresholds (`settled`, `low`, `required_settled`,
    `required_low`)."""

    def __init__(self, message: str, *, evidence: dict[str, dict[str, Any]]):
        self.evidence = evidence
        super().__init__(message)


class PreconditionFailed(DomainError):
    """A change was made from an older version of what it changes (`If-Match` names a tag no longer current).

    It says what the resource is now, and who changed it last and when (`domain/entity_tags.py`)."""

    def __init__(
        self,
        message: str,
        *,
        etag: str,
        last_change: str,
        changed_by: str | None,
        changed_at: datetime | None,
        current: dict[str, Any],
    ):
        self.etag = etag
        self.last_change = last_change
        self.changed_by = changed_by
        self.changed_at = changed_at
        self.current = current
        super().__init__(message)


class InvalidQuery(DomainError):
    """A query parameter is malformed (bad cursor, limit out of range, unknown filter value)."""

    def __init__(self, parameter: str, message: str):
        self.parameter = parameter
        super().__init__(f"{parameter}: {message}")


class IdempotencyMismatch(DomainError):
    """An Idempotency-Key was reused with a different request body."""


class StaleDelivery(DomainError):
    """A correctly signed webhook delivery whose signed time is outside the replay window (or missing).

    It is refused like a bad signature (401), but it is not a failed credential: see `api/errors.py`."""
