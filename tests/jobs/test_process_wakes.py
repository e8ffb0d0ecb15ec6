"""The jobs process's workers wait on `threading.Event` timeouts, which count on the monotonic clock; the clock the
process reads (the wall clock) only says what is due and what time to record. When that clock is stepped back (NTP
correcting a clock that ran ahead, a virtual machine restored from a snapshot), no wait may move with it: the
workers and the heartbeat go on. Run in this process, `JobsProcess.run_forever` as `svc jobs` runs it, on a clock
the test steps back an hour."""

import threading
from datetime import timedelta

from domain.clock import system_clock
from jobs.delivery import OutboxDeliverer, Outcome
from jobs.process import JobsProcess
from storage import job_state, outbox
from storage.db import connection, transaction

from processes import wait_until


class SteppedClock:
    """The real time, stepped back by `behind` when the test says."""

    def __init__(self):
        self.behind = timedelta(0)

    def __call__(self):
        return system_clock() - self.behind


def enqueue(content: str, clock: SteppedClock) -> int:
    with connection(), transaction():
        return outbox.enqueue("chat", {"content": content}, at=clock()).id


def last_beat():
    with connection():
        return job_state.last_beat()


def test_workers_and_the_heartbeat_go_on_after_the_clock_is_stepped_back(app):
    clock = SteppedClock()
    posted = []
    deliverer = OutboxDeliverer({"chat": lambda a: posted.append(a.payload["content"]) or Outcome.sent()}, clock)
    process = JobsProcess(clock, {}, deliverer=deliverer)
    runner = threading.Thread(target=process.run_forever, name="jobs-under-test", daemon=True)
    runner.start()
    try:
        enqueue("before", clock)
        wait_until(lambda: posted == ["before"], timeout=20, what="the first chat post")
        beat = wait_until(last_beat, what="a first heartbeat")
        clock.behind = timedelta(hours=1)
        enqueue("after", clock)
        # A wait planned on the process's clock would now last an hour: the lane and the heartbeat would stop.
        wait_until(lambda: posted == ["before", "after"], timeout=20, what="the chat post after the clock step")
        wait_until(lambda: last_beat() < beat, timeout=20, what="a heartbeat after the clock step")
    finally:
        process.stopping.set()
        runner.join(timeout=30)
    assert not runner.is_alive()
