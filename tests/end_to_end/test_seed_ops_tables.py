"""The seed's "Tickets generally" and "Ops agent behaviour" tables, row by row, through the assembled jobs
process (`jobs.assembly.build`: the scheduled agents and the outbox handlers `svc jobs` runs) on an injected
clock. The Writing poll row runs on the content repository's CI and belongs to the writing agent."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs import assembly
from storage import outbox, slots
from storage.db import connection, transaction

from board import BoardClient
from servers.bays import BayWiper
from servers.linear import API_KEY, FakeLinear

MONDAY = datetime(2026, 11, 23, tzinfo=UTC)


@pytest.fixture
def wiper(tmp_path):
    return BayWiper(tmp_path / "bays")


@pytest.fixture
def linear():
    with FakeLinear() as fake:
        fake.add_issue("ENG-12", fake.add_team("ENG"))
        yield fake


@pytest.fixture
def config(config_factory, wiper, linear):
    return config_factory(bay_wipe_command=wiper.command, tracker_api_url=linear.url, tracker_api_key=API_KEY)


@pytest.fixture
def board(api):
    return BoardClient(api)


@pytest.fixture
def jobs(app, config, clock):
    """What `svc jobs` runs, on the test's clock."""
    return assembly.build(config, clock)


def ops_ran(jobs) -> list[str]:
    """Run what is due; the ops agents that ran (the router's poller and the reconciler run beside them every few
    minutes)."""
    return [agent for agent in jobs.run_due() if agent not in ("poller", "reconciler")]


def chat_posts(source: str) -> list[str]:
    with connection():
        return [m.payload["content"] for m in outbox.recent(kind="chat") if m.payload["source"] == source]


# -- Tickets generally ----------------------------------------------------------------------------------------


def test_mark_done_moves_to_done_releases_the_slot_and_closes_the_tracker_item(board, jobs, wiper, linear):
    board.ticket("PORT-12", tracker_issue_id="ENG-12")
    board.claim("bay-1", "PORT-12")
    assert board.mark_done("PORT-12")["stage"] == "done"
    jobs.drain()
    ticket = board.get("PORT-12")
    assert ticket["stage"] == "done" and ticket["assigned_slot"] is None
    assert board.slots()["bay-1"]["ticket"] is None  # slot_claims cleared
    assert wiper.wiped == ["bay-1"]  # the bay was wiped
    assert linear.find("ENG-12").state.type == "completed"
    assert {"marked_done", "slot_released", "tracker_closed"} <= set(board.kinds("PORT-12"))


def test_a_tracker_close_failure_never_undoes_mark_done(board, jobs, linear):
    board.ticket("PORT-13", tracker_issue_id="ENG-999")
    board.mark_done("PORT-13")
    jobs.drain()
    ticket = board.get("PORT-13")
    assert ticket["stage"] == "done"
    assert ticket["timeline"][0]["kind"] == "tracker_close_failed"


def test_cancel_moves_to_cancelled_and_releases_the_slot(board, jobs, wiper, linear):
    board.ticket("PORT-12", tracker_issue_id="ENG-12")
    board.claim("bay-1", "PORT-12")
    assert board.cancel("PORT-12")["stage"] == "cancelled"
    jobs.drain()
    assert board.get("PORT-12")["assigned_slot"] is None
    assert board.slots()["bay-1"]["ticket"] is None and wiper.wiped == ["bay-1"]
    assert linear.calls == []  # no tracker close for a cancel
    assert linear.find("ENG-12").state.type == "started"


def test_every_pulse_runs_the_slot_steward_for_done_and_cancelled_tickets_stage_unchanged(board, jobs, wiper, clock):
    for key, slot in (("PORT-1", "bay-1"), ("PORT-2", "bay-2"), ("PORT-3", "bay-3")):
        board.ticket(key)
        board.claim(slot, key)
    board.mark_done("PORT-1")
    board.cancel("PORT-2")
    with connection(), transaction():  # their own slot_release messages are not delivered: the pulse's turn
        for message in outbox.recent(kind="slot_release"):
            message.delete_instance()
    clock.move_to(MONDAY + timedelta(hours=8, seconds=10))
    assert ops_ran(jobs) == ["ops-daily-pulse"]
    assert sorted(wiper.wiped) == ["bay-1", "bay-2"]
    held = {name: s["ticket"] for name, s in board.slots().items()}
    assert held == {"bay-1": None, "bay-2": None, "bay-3": "PORT-3"}
    assert [board.get(k)["stage"] for k in ("PORT-1", "PORT-2", "PORT-3")] == ["done", "cancelled", "execute"]


def test_idle_reclaim_at_0400_utc_wipes_slots_idle_more_than_24_hours(board, jobs, wiper, clock):
    clock.move_to(MONDAY - timedelta(hours=21))  # Sunday 03:00
    with connection(), transaction():
        slots.ensure("bay-old", at=clock())
    clock.move_to(MONDAY + timedelta(hours=3, minutes=30))
    with connection(), transaction():
        slots.ensure("bay-new", at=clock())
    clock.move_to(MONDAY + timedelta(hours=4, seconds=10))
    assert ops_ran(jobs) == ["idle-reclaim"]
    assert wiper.wiped == ["bay-old"]  # idle 25 h; bay-new only 30 min


# -- Ops agent behaviour ----------------------------------------------------------------------------------------


def test_daily_pulse_at_0800_utc_posts_only_when_it_finds_issues(board, jobs, clock):
    clock.move_to(MONDAY + timedelta(hours=7, minutes=59))
    jobs.heartbeat()
    assert ops_ran(jobs) == []
    clock.move_to(MONDAY + timedelta(hours=8, seconds=30))
    jobs.heartbeat()
    assert ops_ran(jobs) == ["ops-daily-pulse"]
    assert chat_posts("pulse") == []  # all clear

    board.ticket("PORT-1", stage="human_merge")
    clock.move_to(MONDAY + timedelta(days=1, hours=8, seconds=30))
    jobs.heartbeat()
    assert ops_ran(jobs) == ["ops-daily-pulse"]
    (post,) = chat_posts("pulse")
    assert "needs_you: 1 ticket(s) need you: PORT-1" in post


def test_daily_pulse_always_posts_with_ops_pulse_always(config_factory, wiper, app, clock):
    jobs = assembly.build(config_factory(bay_wipe_command=wiper.command, ops_pulse_always=True), clock)
    clock.move_to(MONDAY + timedelta(hours=8, seconds=30))
    jobs.heartbeat()
    assert ops_ran(jobs) == ["ops-daily-pulse"]
    assert chat_posts("pulse")[0].startswith("**Daily pulse, Mon 23 Nov 2026: all clear**")


def test_weekly_digest_on_monday_at_0900_utc_posts_one_summary(board, jobs, clock):
    board.ticket("PORT-1", stage="blocked")
    clock.move_to(MONDAY + timedelta(hours=9, seconds=30))
    assert ops_ran(jobs) == ["ops-weekly-digest"]
    assert ops_ran(jobs) == []
    (post,) = chat_posts("digest")
    assert "Done this week: nothing" in post and "- PORT-1 Work on PORT-1" in post
    assert "Wallet: " in post and "Staging: " in post
