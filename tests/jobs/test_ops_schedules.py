"""The ops agents on their UTC schedules, decided with an injected clock: nothing here waits for 08:00."""

import json
import os
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime, timedelta

import pytest

from jobs import assembly
from jobs.process import JobsProcess
from storage import runs
from storage.db import connection

MONDAY = datetime(2026, 11, 23, tzinfo=UTC)


# The agents of svc jobs that are not ops agents, each with tests of its own.
NOT_OPS = ("archivist", "poller", "reconciler")


def ran_at(config, clock, moment: datetime) -> list[str]:
    clock.move_to(moment)
    return ops_only(JobsProcess(clock, assembly.scheduled_jobs(config, clock), owner="test").run_due())


def ops_jobs(config, clock) -> dict:
    """The scheduled jobs without the router's poller and the reconciler (every few minutes; they have their own
    tests)."""
    return {agent: job for agent, job in assembly.scheduled_jobs(config, clock).items() if agent not in NOT_OPS}


def ops_only(ran: list[str]) -> list[str]:
    """The ops agents among the jobs that ran (the router's poller and the reconciler have their own tests)."""
    return [agent for agent in ran if agent not in NOT_OPS]


def test_the_jobs_process_schedules_the_pulse_the_digest_and_idle_reclaim(config, clock):
    assert sorted(assembly.scheduled_jobs(config, clock)) == [
        "archivist",
        "idle-reclaim",
        "ops-daily-pulse",
        "ops-weekly-digest",
        "poller",
        "reconciler",
    ]


def test_with_an_external_cron_the_jobs_process_leaves_the_ops_agents_alone(config_factory, clock):
    # the archivist, the router's poller and the reconciler are not among them: they stay in svc jobs
    assert list(assembly.scheduled_jobs(config_factory(ops_scheduler="external"), clock)) == [
        "archivist",
        "poller",
        "reconciler",
    ]
    handlers, _ = assembly.outbox_handlers(config_factory(ops_scheduler="external"), clock)
    assert {"slot_release", "tracker_close"} <= set(handlers)  # delivery still happens in svc jobs


def test_each_agent_runs_at_its_utc_time_once(app, config, clock):
    assert ran_at(config, clock, MONDAY + timedelta(hours=3, minutes=59)) == []
    assert ran_at(config, clock, MONDAY + timedelta(hours=4, seconds=20)) == ["idle-reclaim"]
    assert ran_at(config, clock, MONDAY + timedelta(hours=8, seconds=20)) == ["ops-daily-pulse"]
    assert ran_at(config, clock, MONDAY + timedelta(hours=8, minutes=1)) == []
    assert ran_at(config, clock, MONDAY + timedelta(hours=9, seconds=20)) == ["ops-weekly-digest"]
    tuesday = MONDAY + timedelta(days=1)
    assert ran_at(config, clock, tuesday + timedelta(hours=8, seconds=5)) == ["ops-daily-pulse"]
    assert ran_at(config, clock, tuesday + timedelta(hours=9, seconds=5)) == []  # the digest is Mondays only
    with connection():
        pulse_runs = runs.latest("ops-daily-pulse", 10)
    assert [r.details["scheduled_for"] for r in pulse_runs] == ["2026-11-24T08:00:00Z", "2026-11-23T08:00:00Z"]
    assert all(r.details["trigger"] == "schedule" and r.details["late"] is False for r in pulse_runs)


def test_a_pulse_missed_while_down_runs_once_late(app, config, clock):
    assert ran_at(config, clock, MONDAY + timedelta(hours=8, seconds=5)) == ["ops-daily-pulse"]
    # down over Tuesday 08:00, back at 09:10: within the pulse's two-hour grace
    tuesday = MONDAY + timedelta(days=1)
    assert ran_at(config, clock, tuesday + timedelta(hours=9, minutes=10)) == ["ops-daily-pulse"]
    assert ran_at(config, clock, tuesday + timedelta(hours=9, minutes=11)) == []
    with connection():
        latest = runs.latest("ops-daily-pulse", 1)[0]
    assert latest.details["late"] is True and latest.details["scheduled_for"] == "2026-11-24T08:00:00Z"


DECIDE = textwrap.dedent(
    """
    import json, sys, time
    from datetime import UTC, datetime
    from jobs import assembly
    from jobs.process import JobsProcess
    from storage import db, migrations
    from domain.clock import system_clock
    from domain.config import Config

    url = sys.argv[1]
    db.bind(db.open_database(url))
    migrations.migrate()
    config = Config(database_url=url, ci_webhook_secret="x" * 16, basic_auth="a:bbbbbbbb")
    moments = [None]
    clock = lambda: moments[0]
    out = {"utc_offset_of_host": time.localtime().tm_gmtoff, "system_clock_offset": system_clock().utcoffset().seconds}
    for label, moment in [
        ("08:00 in Auckland (19:00 UTC)", "2026-11-22T19:00:10+00:00"),
        ("08:00 UTC", "2026-11-23T08:00:10+00:00"),
        ("09:00 UTC Monday", "2026-11-23T09:00:10+00:00"),
    ]:
        moments[0] = datetime.fromisoformat(moment)
        ran = JobsProcess(clock, assembly.scheduled_jobs(config, clock), owner="tz").run_due()
        out[label] = [agent for agent in ran if agent not in ("poller", "reconciler")]
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize("zone", ["Pacific/Auckland", "America/Los_Angeles"])
def test_the_schedule_is_utc_whatever_the_hosts_time_zone(tmp_path, zone):
    env = {**os.environ, "TZ": zone}
    url = f"sqlite:///{tmp_path / 'tz.sqlite3'}"
    done = subprocess.run(
        [sys.executable, "-c", DECIDE, url],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["utc_offset_of_host"] != 0  # the zone really is in force in that process
    assert out["system_clock_offset"] == 0
    assert out["08:00 in Auckland (19:00 UTC)"] == []
    assert out["08:00 UTC"] == ["ops-daily-pulse"]
    assert out["09:00 UTC Monday"] == ["ops-weekly-digest"]


@pytest.mark.both_backends
def test_when_two_processes_both_see_the_pulse_due_only_one_claims_it(app, config, clock):
    clock.move_to(MONDAY + timedelta(hours=8, seconds=5))
    first = JobsProcess(clock, ops_jobs(config, clock), owner="a")
    second = JobsProcess(clock, ops_jobs(config, clock), owner="b")
    (seen_by_first,) = first.due()
    (seen_by_second,) = second.due()
    assert seen_by_first == seen_by_second  # both would run it, but for the claim
    barrier = threading.Barrier(2)
    won: list[bool] = []

    def claim(process, run):
        barrier.wait()
        won.append(process.claim(run))

    threads = [
        threading.Thread(target=claim, args=(first, seen_by_first)),
        threading.Thread(target=claim, args=(second, seen_by_second)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(won) == [False, True]
