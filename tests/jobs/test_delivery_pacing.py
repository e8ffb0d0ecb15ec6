"""The outbox outcomes that are not failures: deferred (pacing) and skipped (nothing to deliver to)."""

from datetime import timedelta

import pytest

from jobs.delivery import DEFER_LIMIT, OutboxDeliverer, Outcome
from storage import outbox
from storage.db import connection, transaction

pytestmark = pytest.mark.both_backends


def queue(clock):
    with connection(), transaction():
        return outbox.enqueue("chat", {"content": "hello"}, at=clock()).id


def fetch(message_id):
    with connection():
        return outbox.get(message_id)


def test_a_deferred_message_comes_back_later_without_a_failed_attempt(app, clock):
    message_id = queue(clock)
    jobs = OutboxDeliverer({"chat": lambda a: Outcome.defer("paced", after=2.5)}, clock)
    assert jobs.drain() == 1
    message = fetch(message_id)
    assert (message.status, message.attempts, message.last_error) == ("pending", 0, None)
    assert message.next_attempt_at == clock() + timedelta(seconds=2.5)
    assert jobs.drain() == 0  # not due yet


def test_a_message_deferred_for_longer_than_the_whole_backoff_is_given_up(app, clock):
    message_id = queue(clock)
    jobs = OutboxDeliverer({"chat": lambda a: Outcome.defer("paced", after=3600)}, clock)
    jobs.drain()
    clock.advance(seconds=DEFER_LIMIT.total_seconds() + 1)
    jobs.drain()
    message = fetch(message_id)
    assert message.status == "failed" and "still deferred" in message.last_error


def test_a_skipped_message_is_closed_with_its_reason_and_never_tried_again(app, clock):
    message_id = queue(clock)
    calls = []
    jobs = OutboxDeliverer({"chat": lambda a: calls.append(a) or Outcome.skipped("nowhere to send it")}, clock)
    jobs.drain()
    clock.advance(days=2)
    jobs.drain()
    message = fetch(message_id)
    assert (message.status, message.attempts, message.last_error) == ("skipped", 0, "nowhere to send it")
    assert len(calls) == 1
