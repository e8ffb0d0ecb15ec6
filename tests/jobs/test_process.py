"""The jobs loop's scheduling decisions, with an injected clock: nothing here sleeps until 08:00."""

from datetime import UTC, datetime, timedelta

import pytest

from domain.health import heartbeat_age
from domain.ops.schedules import AGENTS
from jobs.process import JobsProcess, due_slot
from storage.db import connection
from storage.models import AgentRun, JobState

from fakes import FakeClock

PULSE = AGENTS["ops-daily-pulse"]
EIGHT = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)


def test_on_time_run_is_due_once():
    run = due_slot(PULSE, None, EIGHT + timedelta(seconds=20))
    assert run.slot == EIGHT and not run.late
    assert due_slot(PULSE, EIGHT, EIGHT + timedelta(minutes=1)) is None


def test_a_missed_run_is_caught_up_late_within_the_grace_if_the_job_ran_before():
    yesterday = EIGHT - timedelta(days=1)
    run = due_slot(PULSE, yesterday, EIGHT + timedelta(minutes=50))
    assert run.slot == EIGHT and run.late


def test_a_fresh_database_does_not_catch_up():
    assert due_slot(PULSE, None, EIGHT + timedelta(minutes=50)) is None


def test_beyond_the_grace_the_missed_run_is_skipped():
    assert due_slot(PULSE, EIGHT - timedelta(days=1), EIGHT + timedelta(hours=3)) is None


def test_interval_jobs_run_once_per_period():
    poller = AGENTS["poller"]
    now = datetime(2026, 11, 23, 8, 7, tzinfo=UTC)
    run = due_slot(poller, None, now)
    assert run.slot == datetime(2026, 11, 23, 8, 5, tzinfo=UTC)
    assert due_slot(poller, run.slot, now + timedelta(minutes=2)) is None
    assert due_slot(poller, run.slot, now + timedelta(minutes=3)).slot == datetime(2026, 11, 23, 8, 10, tzinfo=UTC)


@pytest.fixture
def ran(app):
    return []


def make_process(clock, ran, owner):
    def pulse(trigger):
        ran.append((owner, trigger.scheduled_for, trigger.late))

    return JobsProcess(clock, {"ops-daily-pulse": pulse}, owner=owner)


@pytest.mark.both_backends
def test_two_processes_run_a_due_job_once(app, clock, ran):
    clock.move_to(EIGHT + timedelta(seconds=30))
    first, second = make_process(clock, ran, "a"), make_process(clock, ran, "b")
    assert first.run_due() == ["ops-daily-pulse"]
    assert second.run_due() == []
    assert ran == [("a", EIGHT, False)]


@pytest.mark.both_backends
def test_a_restart_after_a_missed_time_runs_it_once_marked_late(app, clock, ran):
    clock.move_to(EIGHT - timedelta(days=1) + timedelta(seconds=5))
    make_process(clock, ran, "a").run_due()  # ran yesterday
    clock.move_to(EIGHT + timedelta(minutes=40))  # the process was down at 08:00
    process = make_process(clock, ran, "b")
    assert process.run_due() == ["ops-daily-pulse"]
    assert process.run_due() == []
    assert ran[-1] == ("b", EIGHT, True)


def test_a_job_that_raises_leaves_a_failed_run_and_the_loop_goes_on(app, clock):
    clock.move_to(EIGHT + timedelta(seconds=1))

    def broken(trigger):
        raise RuntimeError("staging check crashed")

    process = JobsProcess(clock, {"ops-daily-pulse": broken}, owner="a")
    assert process.run_due() == ["ops-daily-pulse"]
    with connection():
        run = AgentRun.get(AgentRun.agent_id == "ops-daily-pulse")
        assert (run.status, run.ok) == ("FAILED", False)
        assert "staging check crashed" in run.summary
        assert JobState.get(JobState.job == "ops-daily-pulse").last_finished_at is not None


def test_heartbeat_is_recorded(app, clock):
    process = JobsProcess(clock, {}, owner="a")
    process.heartbeat()
    clock.advance(seconds=42)
    with connection():
        assert heartbeat_age(clock()) == 42


def test_a_rehearsed_schedule_moves_which_due_time_it_is_and_nothing_else(app, clock, ran):
    # Real time is a Friday afternoon; the schedules are read a day and a half earlier, just after an 08:00.
    clock.move_to(EIGHT + timedelta(days=1, hours=6))
    rehearsal = FakeClock(EIGHT + timedelta(seconds=10))
    process = JobsProcess(clock, {"ops-daily-pulse": lambda t: ran.append(t.scheduled_for)}, schedule_clock=rehearsal)
    assert process.run_due() == ["ops-daily-pulse"] and ran == [EIGHT]
    process.heartbeat()
    with connection():
        state = JobState.get(JobState.job == "ops-daily-pulse")
        # The claim and the run are stamped in real time; only the slot is the rehearsed one.
        assert (state.last_slot, state.last_started_at) == (EIGHT, clock())
        assert heartbeat_age(clock()) == 0
