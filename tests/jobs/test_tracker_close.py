"""The tracker close on mark_done: after the commit, through the outbox, against a local Linear-shaped API.
A failure lands on the ticket's timeline and never undoes the mark_done."""

import pytest

from jobs import assembly
from jobs.delivery import BACKOFF, OutboxDeliverer
from storage import outbox
from storage.db import connection

from board import BoardClient
from conftest import BASIC, CI_SECRET
from servers.linear import API_KEY, FakeLinear
from testclient import ApiClient


@pytest.fixture
def linear():
    with FakeLinear() as fake:
        team = fake.add_team("ENG")
        fake.add_issue("ENG-12", team)
        yield fake


@pytest.fixture
def config(config_factory, linear):
    return config_factory(tracker_api_url=linear.url, tracker_api_key=API_KEY)


@pytest.fixture
def board(api):
    return BoardClient(api)


def deliver(config, clock) -> int:
    handlers, recorders = assembly.outbox_handlers(config, clock)
    return OutboxDeliverer(handlers, clock, recorders=recorders).drain(kinds=["tracker_close"])


def tracker_messages():
    with connection():
        return outbox.recent(kind="tracker_close")


def test_mark_done_closes_the_linear_issue_after_the_commit(board, linear, config, clock):
    board.ticket("PORT-7", tracker_issue_id="ENG-12")
    done = board.mark_done("PORT-7")
    assert done["stage"] == "done"
    assert linear.calls == []  # nothing left the process inside the request

    assert deliver(config, clock) == 1
    assert linear.find("ENG-12").state.name == "Done"
    entry = board.timeline("PORT-7")[0]
    assert entry["kind"] == "tracker_closed"
    assert entry["summary"] == "Linear issue ENG-12 set to Done"
    assert deliver(config, clock) == 0  # sent once


def test_a_permanent_failure_is_on_the_timeline_and_the_ticket_stays_done(board, linear, config, clock):
    board.ticket("PORT-7", tracker_issue_id="ENG-404")
    board.mark_done("PORT-7")
    deliver(config, clock)
    ticket = board.get("PORT-7")
    assert ticket["stage"] == "done"
    entry = ticket["timeline"][0]
    assert entry["kind"] == "tracker_close_failed"
    assert entry["summary"] == (
        "tracker close of ENG-404 failed: Linear: Could not find referenced Issue. (invalid input); "
        "the ticket stays done"
    )
    assert tracker_messages()[0].status == "failed"


def test_transient_failures_are_retried_then_given_up_on_the_timeline(board, linear, config, clock):
    board.ticket("PORT-7", tracker_issue_id="ENG-12")
    board.mark_done("PORT-7")
    for _ in range(len(BACKOFF) + 1):
        linear.fail_next(503)
    for wait in (0, *BACKOFF):
        clock.advance(seconds=wait)
        assert deliver(config, clock) == 1
        if tracker_messages()[0].status != "pending":
            break
    assert tracker_messages()[0].status == "failed"
    kinds = board.kinds("PORT-7")
    assert kinds.count("tracker_close_failed") == 1  # retries are quiet; only the final outcome is recorded
    entry = board.timeline("PORT-7")[0]
    assert entry["summary"].startswith(f"tracker close of ENG-12 gave up after {len(BACKOFF) + 1} attempts")
    assert board.get("PORT-7")["stage"] == "done"


def test_a_rate_limit_waits_as_linear_asks(board, linear, config, clock):
    board.ticket("PORT-7", tracker_issue_id="ENG-12")
    board.mark_done("PORT-7")
    linear.rate_limit_next(retry_after=120)
    deliver(config, clock)
    message = tracker_messages()[0]
    assert message.status == "pending" and (message.next_attempt_at - clock()).total_seconds() == 120
    clock.advance(seconds=120)
    deliver(config, clock)
    assert board.timeline("PORT-7")[0]["kind"] == "tracker_closed"


def test_only_done_port_tickets_with_a_tracker_issue_and_a_key_close(board, config_factory, app_factory, clock):
    board.ticket("PORT-1", tracker_issue_id="ENG-1")
    board.cancel("PORT-1")  # cancelled, not done
    board.ticket("WEB-2", tracker_issue_id="ENG-2")
    board.mark_done("WEB-2")  # not a PORT- ticket
    board.ticket("PORT-3")
    board.mark_done("PORT-3")  # no tracker issue
    assert tracker_messages() == []

    keyless = ApiClient(app_factory(config_factory(tracker_api_key=None)), basic=BASIC, ci_secret=CI_SECRET)
    other = BoardClient(keyless, initiative="other")
    other.ticket("PORT-4", tracker_issue_id="ENG-4")
    other.mark_done("PORT-4")  # no tracker key configured
    assert tracker_messages() == []
