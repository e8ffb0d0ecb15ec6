"""Delivering the outbox: each due message is leased, handed to the handler for its kind, and its fate recorded.

A handler returns an `Outcome`: sent; try again later (transient: connection errors, 5xx, 429, a wipe that
timed out); or give up (permanent: 404 webhook, 4xx, a message that can never be sent). An outbound call's
`TransportError` (`integrations/transport.py`) becomes one of the two by `Outcome.failed`. Transient failures
back off from seconds to minutes to hours, and a message still failing after about a day is given up.
Two more outcomes need no failure: deferred (not tried now, e.g. paced under a rate limit; no attempt is
counted, but a message deferred for longer than the whole backoff is given up too) and skipped (handled
on purpose without delivery, e.g. a chat post while no chat webhook is configured).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from domain.clock import Clock
from integrations.transport import TransportError
from storage import outbox
from storage.db import connection, outage_cause, transaction
from storage.models import OutboxMessage

log = logging.getLogger("svc.delivery")

SENT, RETRY, GIVE_UP, DEFER, SKIP = "sent", "retry", "give_up", "defer", "skip"

# Seconds before attempt n+1 after n transient failures; the sum is a little over a day.
BACKOFF = (5, 15, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 28800)
LEASE_SECONDS = 300.0
# A message deferred (never failing) for longer than the whole backoff is given up like a failing one.
DEFER_LIMIT = timedelta(seconds=sum(BACKOFF))
MIN_DEFER_SECONDS = 0.5


@dataclass(frozen=True)
class Outcome:
    status: str
    detail: str = ""
    # For RETRY: wait at least this long (a 429's retry_after); None means "use the backoff".
    retry_after: float | None = None
    result: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def sent(cls, detail: str = "", **result: Any) -> Outcome:
        return cls(SENT, detail, result=result)

    @classmethod
    def retry(cls, detail: str, *, after: float | None = None) -> Outcome:
        return cls(RETRY, detail, retry_after=after)

    @classmethod
    def give_up(cls, detail: str) -> Outcome:
        return cls(GIVE_UP, detail)

    @classmethod
    def failed(cls, error: TransportError) -> Outcome:
        """An outbound call's failure: given up when permanent, else tried again, no sooner than the target asked."""
        if error.permanent:
            return cls.give_up(error.detail)
        return cls.retry(error.detail, after=error.retry_after)

    @classmethod
    def defer(cls, detail: str, *, after: float) -> Outcome:
        """Not tried now (pacing): come back after `after` seconds; no failed attempt is counted."""
        return cls(DEFER, detail, retry_after=after)

    @classmethod
    def skipped(cls, detail: str) -> Outcome:
        """Handled on purpose without delivery; `detail` says why (kept as the message's last note)."""
        return cls(SKIP, detail)


@dataclass(frozen=True)
class Attempt:
    """What a handler knows about the message in hand."""

    message_id: int
    kind: str
    payload: dict[str, Any]
    attempts: int  # failures so far
    final: bool  # True when a transient failure now would exhaust the backoff


Handler = Callable[[Attempt], Outcome]
# Called after the outcome is recorded, in its own transaction, e.g. to put a tracker result on a timeline.
Recorder = Callable[[Attempt, Outcome], None]


class OutboxDeliverer:
    """Drains due messages. Safe to run in several processes at once: a message is leased before it is sent."""

    def __init__(
        self,
        handlers: Mapping[str, Handler],
        clock: Clock,
        *,
        recorders: Mapping[str, Recorder] | None = None,
        owner: str | None = None,
        lease_seconds: float = LEASE_SECONDS,
    ):
        self.handlers = dict(handlers)
        self.recorders = dict(recorders or {})
        self.clock = clock
        self.owner = owner or f"deliverer-{uuid.uuid4().hex[:12]}"
        self.lease_seconds = lease_seconds

    def drain(self, *, limit: int = 50, kinds: list[str] | None = None, stop: threading.Event | None = None) -> int:
        """Deliver what is due now; return how many messages were handled (sent, retried or given up).

        Once `stop` is set, the message in hand is finished and no other is started.
        """
        # Only kinds this deliverer can handle: a message of another kind waits for a process that can.
        kinds = list(self.handlers) if kinds is None else kinds
        if not kinds:
            return 0
        handled = 0
        with connection():
            while handled < limit:
                if stop is not None and stop.is_set():
                    break
                with transaction():
                    message = outbox.lease_next(
                        owner=self.owner, now=self.clock(), seconds=self.lease_seconds, kinds=kinds
                    )
                if message is None:
                    break
                self._hand_over(message)
                handled += 1
        return handled

    def deliver(self, message: OutboxMessage) -> bool:
        """Lease, hand over, record. False when another deliverer holds the message."""
        with transaction():
            if not outbox.lease(message, owner=self.owner, now=self.clock(), seconds=self.lease_seconds):
                return False
        self._hand_over(message)
        return True

    def _hand_over(self, message: OutboxMessage) -> None:
        """The leased message to its handler, and its outcome recorded."""
        attempt = Attempt(
            message_id=message.id,
            kind=message.kind,
            payload=message.payload,
            attempts=message.attempts,
            final=message.attempts >= len(BACKOFF),
        )
        handler = self.handlers.get(message.kind)
        try:
            outcome = handler(attempt) if handler else Outcome.give_up(f"no handler for kind {message.kind!r}")
        except Exception as exc:  # a handler bug must not stop the drain; the message is retried later
            if outage_cause(exc) is not None:
                raise  # the database went away: the lease runs out and the message is handed over again later
            log.exception("outbox handler failed", extra={"message_id": message.id, "kind": message.kind})
            outcome = Outcome.retry(f"handler error: {type(exc).__name__}")
        self._record(message, attempt, outcome)

    def _record(self, message: OutboxMessage, attempt: Attempt, outcome: Outcome) -> None:
        now = self.clock()
        # A later try counts from no earlier than the message's creation: a deliverer whose clock is behind the
        # queuer's must not time a retry before the message existed (it would be due "at once" again).
        base = max(now, message.created_at)
        if outcome.status == DEFER and now - message.created_at > DEFER_LIMIT:
            outcome = Outcome.give_up(f"still deferred after {DEFER_LIMIT}: {outcome.detail}")
        with transaction():
            if outcome.status == SENT:
                outbox.mark_sent(message, owner=self.owner, now=now)
            elif outcome.status == SKIP:
                outbox.mark_skipped(message, owner=self.owner, now=now, reason=outcome.detail)
            elif outcome.status == DEFER:
                after = max(outcome.retry_after or 0.0, MIN_DEFER_SECONDS)
                outbox.mark_deferred(
                    message, owner=self.owner, now=now, next_attempt_at=base + timedelta(seconds=after)
                )
            elif outcome.status == RETRY and not attempt.final:
                delay = BACKOFF[min(attempt.attempts, len(BACKOFF) - 1)]
                if outcome.retry_after is not None:
                    delay = max(outcome.retry_after, 0.0)
                outbox.mark_retry(
                    message,
                    owner=self.owner,
                    now=now,
                    next_attempt_at=base + timedelta(seconds=delay),
                    error=outcome.detail,
                )
            else:
                detail = outcome.detail if outcome.status == GIVE_UP else f"gave up after retries: {outcome.detail}"
                outbox.mark_failed(message, owner=self.owner, now=now, error=detail)
            recorder = self.recorders.get(message.kind)
            if recorder is not None and (
                outcome.status in {SENT, GIVE_UP, SKIP} or (outcome.status == RETRY and attempt.final)
            ):
                recorder(attempt, outcome)
        level = logging.INFO if outcome.status in {SENT, DEFER, SKIP} else logging.WARNING
        log.log(
            level,
            "outbox delivery",
            extra={"message_id": message.id, "kind": message.kind, "outcome": outcome.status, "detail": outcome.detail},
        )
