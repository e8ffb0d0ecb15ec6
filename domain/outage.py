"""A database outage as one process sees it: one log line when the database goes away, naming its first cause,
and one when it is back, rather than a line (or a traceback) for every request or every worker step.

`storage.db.outage_cause` says whether an error is an outage (the database cannot be reached or cannot take the
write) or a bug. The API answers an outage 503 with `Retry-After`; the jobs process's workers wait it out."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from storage.db import UNREACHABLE

log = logging.getLogger("svc.database")

# Seconds a client is asked to wait before trying again (the notify hook honours it within its deadline).
RETRY_AFTER_SECONDS = 3


@dataclass(frozen=True)
class Current:
    kind: str
    cause: str
    since: float  # monotonic
    failures: int
    last: float  # monotonic, the latest failure


class DatabaseOutage:
    """Whether this process last found the database unusable, since when, and why (thread-safe)."""

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic, logger: logging.Logger = log):
        self.monotonic = monotonic
        self.log = logger
        self._lock = threading.Lock()
        self._current: Current | None = None

    @property
    def current(self) -> Current | None:
        return self._current

    def failed(self, kind: str, cause: str) -> None:
        """An operation found the database unusable: logs the first cause once per outage."""
        with self._lock:
            current = self._current
            now = self.monotonic()
            if current is None:
                self._current = Current(kind, cause, now, 1, now)
            else:
                self._current = Current(current.kind, current.cause, current.since, current.failures + 1, now)
        if current is None:
            self.log.error("database unavailable: %s", cause, extra={"kind": kind, "cause": cause})

    def recovered(self, *, wrote: bool) -> None:
        """An operation used the database: a write that committed ends any outage; a read ends only an outage
        of reaching it (a full disk still reads)."""
        with self._lock:
            current = self._current
            if current is None or (not wrote and current.kind != UNREACHABLE):
                return
            self._current = None
        seconds = self.monotonic() - current.since
        self.log.warning(
            "database available again after %.0f s (%d operations failed; first cause: %s)",
            seconds,
            current.failures,
            current.cause,
            extra={"kind": current.kind, "cause": current.cause, "failures": current.failures},
        )
