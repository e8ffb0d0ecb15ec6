"""Structured log lines: waitress's queue-depth warnings are sampled, not written once per request."""

import io
import json
import logging

import pytest

from svc import logs


@pytest.fixture(autouse=True)
def restored_logging():
    """`configure` sets the process's logging up; give the next test back what it had."""
    root, queue = logging.getLogger(), logging.getLogger("waitress.queue")
    saved = root.handlers[:], root.level, queue.filters[:], queue.level
    yield
    root.handlers[:], level, queue.filters[:], queue_level = saved
    root.setLevel(level)
    queue.setLevel(queue_level)


def test_waitress_queue_warnings_go_out_once_per_interval_saying_how_many_were_folded():
    stream = io.StringIO()
    logs.configure("INFO", stream=stream)
    ticks = [100.0]
    queue = logging.getLogger("waitress.queue")
    queue.filters[:] = [logs.QueueDepthSampler(10.0, monotonic=lambda: ticks[0])]

    for depth in range(1, 1001):  # a burst under load: waitress warns on every request it queues
        queue.warning("Task queue depth is %d", depth)
    ticks[0] += 10.0
    queue.warning("Task queue depth is %d", 3)

    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["message"], line["folded"], line["deepest"]) for line in lines] == [
        ("Task queue depth is 1", 0, 1),
        ("Task queue depth is 3", 999, 1000),
    ]
    assert all(line["logger"] == "waitress.queue" and line["level"] == "warning" for line in lines)


def test_configure_samples_the_queue_warnings_and_keeps_every_other_line():
    stream = io.StringIO()
    logs.configure("INFO", stream=stream)
    for _ in range(50):
        logging.getLogger("waitress.queue").warning("Task queue depth is %d", 2)
        logging.getLogger("svc.access").info("request", extra={"status": 200})
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert sum(line["logger"] == "waitress.queue" for line in lines) == 1
    assert sum(line["logger"] == "svc.access" for line in lines) == 50
