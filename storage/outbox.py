"""The outbox: side effects written in the transaction that caused them and delivered after commit.

A deliverer leases due messages (a compare-and-swap on status and lease), makes the outbound call, and
records the outcome. A crash between the call and the record leaves the lease to expire, so the message is
tried again: delivery is at least once, and exactly once whenever the deliverer survives.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from peewee import fn

from storage import statements
from storage.db import is_postgres
from storage.models import OutboxMessage, stored_time

PENDING, SENT, FAILED = "pending", "sent", "failed"
# Handled on purpose without delivery, e.g. a chat post while no chat webhook is configured ("recorded, not sent").
SKIPPED = "skipped"


def enqueue(kind: str, payload: dict[str, Any], *, at: datetime) -> OutboxMessage:
    return statements.insert(
        OutboxMessage,
        {
            "kind": kind,
            "payload": payload,
            "status": PENDING,
            "attempts": 0,
            "next_attempt_at": at,
            "created_at": at,
            "updated_at": at,
        },
    )


def _due(*fields, now: datetime, kinds: list[str] | None):
    # A message queued for "at once" (its first try due when it was created) is due whatever this process's
    # clock says: it is judged by the clock that queued it. So a deliverer on a host a few seconds behind the
    # API's delivers without that delay. A later try (a retry, a deferral) was timed by a deliverer's clock
    # and is judged by the reader's.
    query = OutboxMessage.select(*fields).where(
        (OutboxMessage.status == PENDING)
        & ((OutboxMessage.next_attempt_at <= now) | (OutboxMessage.next_attempt_at <= OutboxMessage.created_at))
        & ((OutboxMessage.lease_until.is_null()) | (OutboxMessage.lease_until < now))
    )
    if kinds:
        query = query.where(OutboxMessage.kind.in_(kinds))
    return query.order_by(OutboxMessage.next_attempt_at, OutboxMessage.id)


def due(*, now: datetime, kinds: list[str] | None = None, limit: int = 20) -> list[OutboxMessage]:
    """Pending messages whose next attempt is due and that nobody holds a live lease on, oldest first."""
    return list(_due(now=now, kinds=kinds).limit(limit))


def lease_next(*, owner: str, now: datetime, seconds: float, kinds: list[str] | None = None) -> OutboxMessage | None:
    """Lease the oldest due message nobody holds to `owner` for `seconds`; None when none is due. Call it inside
    a transaction.

    On PostgreSQL the message is picked with `FOR UPDATE SKIP LOCKED`: deliverers in several processes each take
    a different message at once, instead of queueing on the lock of the same oldest row and finding it leased.
    On SQLite the transaction holds the database's one write lock, so nobody can lease between the pick and the
    compare-and-swap.
    """
    if is_postgres():
        pick = _due(OutboxMessage.id, now=now, kinds=kinds).limit(1).for_update(skip_locked=True)
        leased = (
            OutboxMessage.update(lease_owner=owner, lease_until=now + timedelta(seconds=seconds), updated_at=now)
            .where(OutboxMessage.id == pick)
            .returning(OutboxMessage)
            .execute()
        )
        return next(iter(leased), None)
    first = _due(now=now, kinds=kinds).first()
    if first is None or not lease(first, owner=owner, now=now, seconds=seconds):
        return None
    return first


def lease(message: OutboxMessage, *, owner: str, now: datetime, seconds: float) -> bool:
    """Take the message for `seconds`; False if another deliverer took it first."""
    until = now + timedelta(seconds=seconds)
    taken = (
        OutboxMessage.update(lease_owner=owner, lease_until=until, updated_at=now)
        .where(
            (OutboxMessage.id == message.id)
            & (OutboxMessage.status == PENDING)
            & ((OutboxMessage.lease_until.is_null()) | (OutboxMessage.lease_until < now))
        )
        .execute()
    )
    if taken == 1:
        message.lease_owner, message.lease_until = owner, until
    return taken == 1


def _release(message: OutboxMessage, *, owner: str, now: datetime, tried: bool, **changes) -> None:
    """Record what became of a leased message and give the lease up, only if `owner` still holds it."""
    if tried:
        changes["attempts"] = OutboxMessage.attempts + 1
    OutboxMessage.update(updated_at=now, lease_owner=None, lease_until=None, **changes).where(
        (OutboxMessage.id == message.id) & (OutboxMessage.lease_owner == owner)
    ).execute()


def mark_sent(message: OutboxMessage, *, owner: str, now: datetime) -> None:
    _release(message, owner=owner, now=now, tried=True, status=SENT, sent_at=now, last_error=None)


def mark_retry(message: OutboxMessage, *, owner: str, now: datetime, next_attempt_at: datetime, error: str) -> None:
    _release(message, owner=owner, now=now, tried=True, next_attempt_at=next_attempt_at, last_error=error[:2000])


def mark_failed(message: OutboxMessage, *, owner: str, now: datetime, error: str) -> None:
    _release(message, owner=owner, now=now, tried=True, status=FAILED, last_error=error[:2000])


def mark_deferred(message: OutboxMessage, *, owner: str, now: datetime, next_attempt_at: datetime) -> None:
    """Put the message back for later without counting a failed attempt (it was not tried: pacing)."""
    _release(message, owner=owner, now=now, tried=False, next_attempt_at=next_attempt_at)


def mark_skipped(message: OutboxMessage, *, owner: str, now: datetime, reason: str) -> None:
    """Close the message without delivering it; `reason` (kept in `last_error`) says why."""
    _release(message, owner=owner, now=now, tried=False, status=SKIPPED, last_error=reason[:2000])


def sent_since(kind: str, since: datetime, *, limit: int) -> list[datetime]:
    """When the newest (at most `limit`) messages of `kind` sent at or after `since` went out, newest first."""
    query = (
        OutboxMessage.select(OutboxMessage.sent_at)
        .where((OutboxMessage.kind == kind) & (OutboxMessage.sent_at >= since) & (OutboxMessage.status == SENT))
        .order_by(OutboxMessage.sent_at.desc())
        .limit(limit)
    )
    return [row.sent_at for row in query]


def get(message_id: int) -> OutboxMessage | None:
    return OutboxMessage.get_or_none(OutboxMessage.id == message_id)


def backlog(*, now: datetime) -> dict[str, Any]:
    """Pending count and the age of the oldest pending message, for health checks and metrics."""
    row = (
        OutboxMessage.select(fn.COUNT(OutboxMessage.id), fn.MIN(OutboxMessage.created_at))
        .where(OutboxMessage.status == PENDING)
        .tuples()
        .first()
    )
    count, oldest = row if row else (0, None)
    if isinstance(oldest, str):  # SQLite hands aggregates back as text
        oldest = stored_time(oldest)
    if oldest is not None and oldest.tzinfo is None:
        from datetime import UTC

        oldest = oldest.replace(tzinfo=UTC)
    age = (now - oldest).total_seconds() if oldest is not None else 0.0
    return {"pending": count or 0, "oldest_age_seconds": max(age, 0.0)}


def count_failed_since(since: datetime) -> int:
    """Messages given up on since `since` (a chat post or tracker close that never left)."""
    return OutboxMessage.select().where((OutboxMessage.status == FAILED) & (OutboxMessage.updated_at >= since)).count()


def recent(*, kind: str | None = None, status: str | None = None, limit: int = 50) -> list[OutboxMessage]:
    query = OutboxMessage.select()
    if kind:
        query = query.where(OutboxMessage.kind == kind)
    if status:
        query = query.where(OutboxMessage.status == status)
    return list(query.order_by(OutboxMessage.id.desc()).limit(limit))
