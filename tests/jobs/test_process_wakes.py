"""The jobs process's main thread wakes its workers by the `schedule` library, which reads the wall clock. When
the wall clock is stepped back (NTP correcting a clock that ran ahead, a virtual machine restored from a snapshot),
every wake it planned moves that far into the future; the workers must go on all the same. Run in this process,
`JobsProcess.run_forever` as `svc jobs` runs it, with `schedule` reading a wall clock the test steps back."""

import datetime
import threading
import types

import pytest
import schedule

from domain.clock import system_clock
from jobs.delivery import OutboxDeliverer, Outcome
from jobs.process import JobsProcess
from storage import job_state, outbox
from storage.db import connection, transaction

from processes import wait_until


@pytest.fixture
def stepped_wall_clock(monkeypatch):
    """`schedule`'s view of the wall clock; set `.behind` to step it back."""
    state = types.SimpleNamespace(behind=datetime.timedelta(0))

    class Stepped(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime.now(tz) - state.behind

    monkeypatch.setattr(
        schedule, "datetime", types.SimpleNamespace(datetime=Stepped, time=datetime.time, timedelta=datetime.timedelta)
    )
    return state


def enqueue(content: str) -> int:
    with connection(), transaction():
        return outbox.enqueue("chat", {"content": content}, at=system_clock()).id


def last_beat():
    with connection():
        return job_state.last_beat()


def test_workers_and_the_heartbeat_go_on_after_the_wall_clock_is_stepped_back(app, stepped_wall_clock):
    posted = []
    deliverer = OutboxDeliverer({"chat": lambda a: posted.append(a.payload["content"]) or Outcome.sent()}, system_clock)
    process = JobsProcess(system_clock, {}, deliverer=deliverer)
    runner = threading.Thread(target=process.run_forever, name="jobs-under-test", daemon=True)
    runner.start()
    try:
        enqueue("before")
        wait_until(lambda: posted == ["before"], timeout=20, what="the first chat post")
        stepped_wall_clock.behind = datetime.timedelta(hours=1)
        beat = wait_until(last_beat, what="a first heartbeat")
        enqueue("after")
        # Before: nothing for an hour, the lane and the heartbeat waiting for wakes planned by the old clock.
        wait_until(lambda: posted == ["before", "after"], timeout=20, what="the chat post after the clock step")
        wait_until(lambda: last_beat() > beat, timeout=20, what="a heartbeat after the clock step")
    finally:
        process.stopping.set()
        runner.join(timeout=30)
    assert not runner.is_alive()
