"""`Idempotency-Key` (answers kept by `storage/idempotency.py`): a repeated request returns the first answer and
records nothing new.

The lookup, the work and the stored answer share one transaction, so a key is either stored with
everything its request did or not at all. Two twins racing with one key both do the work, but only one
can store the key (it is unique): the other rolls back, is retried by `domain.units.run`, and then finds the
first answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from domain.errors import IdempotencyMismatch
from storage import idempotency

# Keys are kept at least a day (the contract's minimum), pruned when older than two.
KEEP = timedelta(hours=48)


def request_hash(body: Any) -> str:
    """A fingerprint of the request body, insensitive to key order and whitespace."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def once(
    scope: str,
    key: str | None,
    body: Any,
    work: Callable[[], dict[str, Any]],
    *,
    now: datetime,
) -> tuple[dict[str, Any], bool]:
    """Inside the caller's transaction: the stored answer for (`scope`, `key`), or `work()`'s, stored.

    Returns (answer, replayed). `work()` returns JSON values; the first answer comes back as the record keeps
    it (every object's keys sorted), so a repeat gets the very same answer. Without a key, `work()` runs every
    time. The same key with another body raises `IdempotencyMismatch`.
    """
    if key is None:
        return work(), False
    fingerprint = request_hash(body)
    found = idempotency.find(scope, key)
    if found is not None:
        if found.request_hash != fingerprint:
            raise IdempotencyMismatch(
                f"Idempotency-Key {key!r} was first used with a different request body; use a new key"
            )
        return found.response, True
    answer = _as_kept(work())
    idempotency.forget_older_than(now - KEEP)
    idempotency.save(scope, key, request_hash=fingerprint, response=answer, at=now)
    return answer, False


def _as_kept(answer: Any) -> Any:
    """`answer` as the record reads back (its JSON column sorts every object's keys)."""
    return json.loads(json.dumps(answer, sort_keys=True, ensure_ascii=False))
