"""Running a unit of work: one transaction, retried when a compare-and-swap lost a race.

On SQLite every write transaction holds the write lock from its first statement, so races do not happen;
on PostgreSQL two API processes can read the same ticket version, and the loser of the compare-and-swap
starts over from a fresh read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from peewee import IntegrityError, OperationalError

from domain.errors import Conflict
from storage.db import transaction, write

T = TypeVar("T")

ATTEMPTS = 6


class StaleRead(Exception):
    """A compare-and-swap touched no row: someone changed the row since this unit of work read it."""


def run(work: Callable[[], T], *, what: str = "the request") -> T:
    """Run `work()` in a transaction; start over (up to `ATTEMPTS` times) when it raises `StaleRead`.

    The answer comes back once it is committed; on SQLite, alongside other threads' units in one commit
    (`storage.db.write`), each attempt taken back alone when it fails.

    `IntegrityError` and PostgreSQL serialization/deadlock failures are raced inserts or updates and are
    retried the same way; when a later attempt sees the other writer's row, `work` decides what that means.
    """
    return write(lambda: _attempts(work, what))


def _attempts(work: Callable[[], T], what: str) -> T:
    last: Exception | None = None
    for _ in range(ATTEMPTS):
        try:
            with transaction():
                return work()
        except StaleRead as exc:
            last = exc
        except IntegrityError as exc:
            last = exc
        except OperationalError as exc:
            if not _is_retryable(exc):
                raise
            last = exc
    raise Conflict(f"{what} collided with concurrent changes {ATTEMPTS} times; try again") from last


def _is_retryable(exc: OperationalError) -> bool:
    code = getattr(getattr(exc, "orig", None) or exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    text = str(exc).lower()
    return code in {"40001", "40P01"} or "deadlock" in text or "could not serialize" in text
