"""Real `svc jobs` processes on one database. SVC_JOBS_CLOCK_OFFSET reads their schedules just after the most
recent due time (a rehearsal of it, computed from now), so a scheduled job is due the moment they start instead
of at the next 08:00; everything else they do keeps real time."""

import json
import signal
from datetime import UTC, datetime, timedelta

import pytest
import requests

from storage import job_state, runs, slots
from storage.db import connection
from storage.models import OutboxMessage

from board import BoardClient
from conftest import BASIC, CI_SECRET
from processes import ServiceProcess, last_due, rehearsal_offset, start_service, svc_env, wait_until
from servers.bays import BayWiper
from servers.discord import FakeDiscord

pytestmark = pytest.mark.process

READY = "jobs process ready: first scheduling pass done"


def jobs_process(tmp_path, database_url, name: str, due: datetime, **extra: str) -> ServiceProcess:
    env = svc_env(
        SVC_DATA_DIR=str(tmp_path / name),
        DATABASE_URL=database_url,
        SVC_CI_WEBHOOK_SECRET=CI_SECRET,
        SVC_BASIC_AUTH=BASIC,
        SVC_JOBS_CLOCK_OFFSET=rehearsal_offset(due),
        **extra,
    )
    return ServiceProcess(["jobs"], env, tmp_path / f"{name}.log").start()


def _starts(log: str, agent_id: str) -> int:
    """How many scheduled runs of `agent_id` this process started (the poller runs beside them)."""
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return sum(1 for line in lines if line["message"] == "scheduled run starting" and line.get("agent_id") == agent_id)


def run_count(agent_id: str) -> int:
    with connection():
        return len(runs.latest(agent_id, 10))


@pytest.mark.parametrize(
    ("agent_id", "cron"),
    [
        # The claim of a due run is one compare-and-swap whichever the agent: one of them races on PostgreSQL too.
        pytest.param("ops-daily-pulse", "0 8 * * *", marks=pytest.mark.both_backends),
        ("ops-weekly-digest", "0 9 * * 1"),
        ("idle-reclaim", "0 4 * * *"),
        ("archivist", "30 3 * * *"),
    ],
)
def test_two_jobs_processes_on_one_database_run_a_due_job_once(app, tmp_path, database_url, agent_id, cron):
    due = last_due(cron)
    began = datetime.now(UTC)
    # One of them thinks it lives in Auckland: the schedule is UTC all the same.
    first = jobs_process(tmp_path, database_url, "a", due)
    second = jobs_process(tmp_path, database_url, "b", due, TZ="Pacific/Auckland")
    try:
        wait_until(lambda: READY in first.output() and READY in second.output(), what="both first passes")
        wait_until(lambda: run_count(agent_id) >= 1, what=f"a {agent_id} run")
    finally:
        assert first.stop() == 0 and second.stop() == 0
    assert run_count(agent_id) == 1
    starts = [_starts(p.output(), agent_id) for p in (first, second)]
    assert sorted(starts) == [0, 1]
    with connection():
        run = runs.latest(agent_id, 1)[0]
    assert run.details["trigger"] == "schedule"
    assert run.details["scheduled_for"] == due.isoformat().replace("+00:00", "Z")
    # The run is recorded in real time; only the due time it ran for is the rehearsed one.
    assert began <= run.started_at <= datetime.now(UTC)


def test_sigterm_finishes_the_job_in_hand(api, tmp_path, database_url):
    board = BoardClient(api)
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    # The cancel queues a slot release and the pulse runs the slot steward: whichever of the two workers leases
    # bay-1's wipe first holds it (held mid-way here); the other finds the wipe in progress and leaves it alone.
    board.cancel("PORT-1")
    wiper = BayWiper(tmp_path / "bays")
    wiper.hold()
    jobs = jobs_process(tmp_path, database_url, "jobs", last_due("0 8 * * *"), SVC_BAY_WIPE_COMMAND=wiper.command_line)
    try:
        wait_until(lambda: wiper.started("bay-1"), what="bay-1's wipe to start")
        wait_until(lambda: _starts(jobs.output(), "ops-daily-pulse") == 1, what="the pulse to start")
        jobs.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: "stopping after the work in hand" in jobs.output(), what="the jobs process to take SIGTERM")
        assert jobs.proc.poll() is None and wiper.wiped == []  # still finishing the wipe
        wiper.release()
        assert jobs.proc.wait(timeout=30) == 0
    finally:
        jobs.stop()
    assert wiper.wiped == ["bay-1"]
    with connection():
        assert slots.claim_of("bay-1") is None
        (pulse,) = runs.latest("ops-daily-pulse", 10)
        stewards = {run.id: run for run in runs.latest("slot-steward", 10)}
    assert pulse.details["steward_run"] in stewards  # the pulse finished and recorded its steward's run
    assert [run.status for run in stewards.values()].count("RELEASED") == 1
    assert "jobs process stopped" in jobs.output()


def test_a_jobs_process_rehearsing_a_past_schedule_delivers_what_the_api_queues_now(app, tmp_path, database_url):
    # Yesterday's 08:00 is rehearsed: the offset is a day and more behind. The chat post a notify queues now is
    # delivered at once all the same, and the heartbeat, the lease and the run keep real time.
    rehearsed = last_due("0 8 * * *") - timedelta(days=1)
    with FakeDiscord() as discord:
        env = {"SVC_CI_WEBHOOK_SECRET": CI_SECRET, "SVC_BASIC_AUTH": BASIC, "DISCORD_WEBHOOK_URL": discord.url}
        server, base = start_service(tmp_path, database_url, **env)
        began = datetime.now(UTC)
        jobs = jobs_process(tmp_path, database_url, "jobs", rehearsed, DISCORD_WEBHOOK_URL=discord.url)
        try:
            wait_until(lambda: READY in jobs.output(), what="the jobs process's first pass")
            assert float(jobs.env["SVC_JOBS_CLOCK_OFFSET"]) < -86400
            answer = requests.post(
                base + "/api/v1/agents/writing/notify",
                json={"status": "BACKFILL_READY", "missing": 2},
                headers={"X-Svc-CI-Secret": CI_SECRET},
                timeout=10,
            )
            assert answer.status_code == 200 and answer.json()["chat"] == "queued"
            wait_until(
                lambda: any(m["content"].startswith("✍️ Writing") for m in discord.messages),
                timeout=30,
                what="the notify's chat post to reach the webhook",
            )
            wait_until(lambda: run_count("ops-daily-pulse") == 1, what="the rehearsed pulse")
        finally:
            jobs.stop()
            server.stop()
        with connection():
            (pulse,) = runs.latest("ops-daily-pulse", 10)
            chat = OutboxMessage.select().where(OutboxMessage.kind == "chat")
            assert {m.status for m in chat} == {"sent"}
            beat = job_state.last_beat()
        assert pulse.details["scheduled_for"] == rehearsed.isoformat().replace("+00:00", "Z")
        ended = datetime.now(UTC)
        assert began <= pulse.started_at <= ended and began <= beat <= ended
        writing = [m for m in discord.messages if m["content"].startswith("✍️ Writing")]
        assert len(writing) == 1, discord.contents()
