"""Outbox delivery: lease, hand over, record; transient failures back off, permanent ones give up."""

from datetime import timedelta

import pytest

from jobs.delivery import BACKOFF, OutboxDeliverer, Outcome
from storage import outbox
from storage.db import connection, transaction

from fakes import FakeClock

pytestmark = pytest.mark.both_backends


@pytest.fixture
def queued(app, clock):
    with connection(), transaction():
        return outbox.enqueue("chat", {"content": "hello"}, at=clock()).id


def fetch(message_id):
    with connection():
        return outbox.get(message_id)


def test_a_sent_message_is_not_sent_again(app, clock, queued):
    calls = []
    deliverer = OutboxDeliverer({"chat": lambda a: calls.append(a.payload) or Outcome.sent()}, clock)
    assert deliverer.drain() == 1
    assert deliverer.drain() == 0
    assert calls == [{"content": "hello"}]
    message = fetch(queued)
    assert (message.status, message.attempts) == ("sent", 1)


def test_transient_failures_back_off_and_give_up_after_about_a_day(app, clock, queued):
    deliverer = OutboxDeliverer({"chat": lambda a: Outcome.retry("503 from chat")}, clock)
    waited = 0
    for expected in BACKOFF:
        assert deliverer.drain() == 1
        message = fetch(queued)
        assert message.status == "pending"
        assert message.next_attempt_at - clock() == timedelta(seconds=expected)
        assert deliverer.drain() == 0  # not due yet
        clock.advance(seconds=expected)
        waited += expected
    assert deliverer.drain() == 1
    message = fetch(queued)
    assert message.status == "failed" and "503" in message.last_error
    assert timedelta(hours=20) < timedelta(seconds=waited) < timedelta(hours=30)


def test_retry_after_overrides_the_backoff(app, clock, queued):
    OutboxDeliverer({"chat": lambda a: Outcome.retry("429", after=7.5)}, clock).drain()
    assert fetch(queued).next_attempt_at - clock() == timedelta(seconds=7.5)


def test_a_permanent_failure_gives_up_at_once(app, clock, queued):
    OutboxDeliverer({"chat": lambda a: Outcome.give_up("404: webhook deleted")}, clock).drain()
    message = fetch(queued)
    assert message.status == "failed" and message.last_error == "404: webhook deleted"


def test_a_leased_message_is_not_taken_by_a_second_deliverer(app, clock, queued):
    first = OutboxDeliverer({"chat": lambda a: Outcome.sent()}, clock, owner="a")
    second = OutboxDeliverer({"chat": lambda a: Outcome.sent()}, clock, owner="b")
    message = fetch(queued)
    with connection(), transaction():
        assert outbox.lease(message, owner="a", now=clock(), seconds=60)
    assert second.drain() == 0
    clock.advance(seconds=61)  # the first deliverer died holding it: the lease runs out and it goes again
    assert second.drain() == 1
    assert first.drain() == 0


def test_kinds_without_a_handler_wait(app, clock, queued):
    assert OutboxDeliverer({"tracker_close": lambda a: Outcome.sent()}, clock).drain() == 0
    assert fetch(queued).status == "pending"


def test_a_crashing_handler_is_a_transient_failure(app, clock, queued):
    def crash(attempt):
        raise ValueError("bug")

    assert OutboxDeliverer({"chat": crash}, clock).drain() == 1
    message = fetch(queued)
    assert message.status == "pending" and "ValueError" in message.last_error


def test_two_deliverers_draining_at_once_deliver_every_message_once(app, clock):
    import threading

    with connection(), transaction():
        ids = {outbox.enqueue("chat", {"content": f"post {n}"}, at=clock()).id for n in range(120)}
    delivered: list[tuple[int, str]] = []
    lock = threading.Lock()
    both_started = threading.Barrier(2)

    def deliverer(name: str) -> OutboxDeliverer:
        def post(attempt):
            with lock:
                delivered.append((attempt.message_id, name))
            return Outcome.sent()

        return OutboxDeliverer({"chat": post}, clock, owner=name)

    def run(d: OutboxDeliverer) -> None:
        both_started.wait(timeout=30)
        while d.drain(limit=10):
            pass

    threads = [threading.Thread(target=run, args=(deliverer(n),)) for n in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert sorted(message_id for message_id, _ in delivered) == sorted(ids)
    with connection():
        assert {m.status for m in outbox.recent(limit=500)} == {"sent"}
        assert sum(m.attempts for m in outbox.recent(limit=500)) == len(ids)


def test_on_postgresql_a_deliverer_passes_a_message_another_holds_locked(app, clock, config):
    # While another transaction holds the oldest due row (a deliverer in the middle of leasing it), the next
    # deliverer takes the one after it at once instead of waiting on the lock: FOR UPDATE SKIP LOCKED.
    from storage.db import is_postgres

    if not is_postgres():
        pytest.skip("row locks are PostgreSQL's; on SQLite the one write lock serializes leasing (test above)")
    import psycopg

    with connection(), transaction():
        first = outbox.enqueue("chat", {"content": "first"}, at=clock()).id
        second = outbox.enqueue("chat", {"content": "second"}, at=clock()).id
    with psycopg.connect(config.database_url) as holder:
        holder.execute("SELECT id FROM outbox_message WHERE id = %s FOR UPDATE", (first,))
        with connection():
            # Without SKIP LOCKED this would wait for the holder; a lock timeout turns that into a failure.
            from storage.db import db

            with transaction():
                db.execute_sql("SET LOCAL lock_timeout = '5s'")
                taken = outbox.lease_next(owner="second-deliverer", now=clock(), seconds=60, kinds=["chat"])
        holder.rollback()
    assert taken is not None and taken.id == second
    assert taken.lease_owner == "second-deliverer" and taken.payload == {"content": "second"}
    assert fetch(first).lease_owner is None


def test_a_deliverer_whose_clock_is_behind_the_queuers_delivers_at_once(app, clock, queued):
    # The API host queued the message at clock(); this deliverer's host runs 30 s behind it.
    behind = FakeClock(clock() - timedelta(seconds=30))
    calls = []
    deliverer = OutboxDeliverer({"chat": lambda a: calls.append(a.message_id) or Outcome.sent()}, behind)
    assert deliverer.drain() == 1 and calls == [queued]
    assert fetch(queued).status == "sent"


def test_a_retry_by_a_deliverer_behind_the_queuer_still_waits_its_backoff(app, clock, queued):
    behind = FakeClock(clock() - timedelta(seconds=30))
    deliverer = OutboxDeliverer({"chat": lambda a: Outcome.retry("503 from chat")}, behind)
    assert deliverer.drain() == 1
    # Timed from the message's creation, never before it: not due "at once" again on this host.
    assert fetch(queued).next_attempt_at == clock() + timedelta(seconds=BACKOFF[0])
    assert deliverer.drain() == 0
    behind.move_to(clock() + timedelta(seconds=BACKOFF[0]))
    assert deliverer.drain() == 1


def test_a_message_queued_for_later_waits_for_the_deliverers_clock(app, clock):
    with connection(), transaction():
        later = outbox.enqueue("chat", {"content": "later"}, at=clock())
        assert outbox.lease(later, owner="pacer", now=clock(), seconds=300)
        outbox.mark_deferred(later, owner="pacer", now=clock(), next_attempt_at=clock() + timedelta(seconds=60))
    deliverer = OutboxDeliverer({"chat": lambda a: Outcome.sent()}, clock)
    assert deliverer.drain() == 0
    clock.advance(seconds=60)
    assert deliverer.drain() == 1
