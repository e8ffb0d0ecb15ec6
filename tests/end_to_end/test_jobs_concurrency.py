"""A real `svc jobs` while a bay wipe runs: the wipe command (`tests/servers/bays.py`) is held mid-wipe — it
exits when the test releases it, or after 60 s — so what must happen "while the wipe runs" is observed as an
ordering: the chat post reaches the Discord-shaped server, the tracker close reaches the Linear-shaped one, and
the heartbeat beats again, before the wipe command has exited. SIGTERM during a wipe lets it finish and records
its run before the process exits 0."""

import signal

import pytest
import requests

from storage import job_state, outbox, runs, slots
from storage.db import connection
from storage.models import OutboxMessage

from conftest import BASIC, CI_SECRET
from processes import ServiceProcess, start_service, svc_env, wait_until
from servers.bays import BayWiper
from servers.discord import FakeDiscord
from servers.linear import API_KEY, FakeLinear

pytestmark = pytest.mark.process


def jobs_process(tmp_path, database_url, **extra: str) -> ServiceProcess:
    # The real clock: the API process judges the heartbeat's age by it. The ops agents are left to an external
    # cron, so no scheduled pulse (and its slot steward) joins in when the test runs at 08:00 UTC.
    env = svc_env(
        SVC_DATA_DIR=str(tmp_path / "jobs"),
        DATABASE_URL=database_url,
        SVC_CI_WEBHOOK_SECRET=CI_SECRET,
        SVC_BASIC_AUTH=BASIC,
        SVC_OPS_SCHEDULER="external",
        **extra,
    )
    return ServiceProcess(["jobs"], env, tmp_path / "jobs.log").start()


def person() -> requests.Session:
    session = requests.Session()
    session.auth = tuple(BASIC.split(":", 1))
    return session


def cancelled_ticket_on_a_bay(base: str) -> None:
    """PORT-1 holds bay-1 and is cancelled: a slot release (a bay wipe) waits in the outbox."""
    answers = [
        person().post(base + "/api/v1/initiatives", json={"id": "port", "name": "Port", "stage": "active"}),
        person().post(
            base + "/api/v1/tickets",
            json={"key": "PORT-1", "initiative_id": "port", "title": "Login", "stage": "execute"},
        ),
        person().post(base + "/api/v1/slots/bay-1/claim", json={"ticket": "PORT-1"}),
        person().post(base + "/api/v1/tickets/PORT-1/cancel"),
    ]
    assert [a.status_code for a in answers] == [201, 201, 200, 200], [a.text for a in answers]


def release_message() -> OutboxMessage:
    with connection():
        (message,) = outbox.recent(kind="slot_release")
        return message


def test_chat_and_tracker_go_out_and_the_heartbeat_beats_while_a_bay_wipe_runs(app, tmp_path, database_url):
    wiper = BayWiper(tmp_path / "bays")
    wiper.hold()
    with FakeDiscord() as discord, FakeLinear() as linear:
        linear.add_issue("ENG-12", linear.add_team("ENG"))
        outbound = {
            "DISCORD_WEBHOOK_URL": discord.url,
            "SVC_TRACKER_API_URL": linear.url,
            "SVC_TRACKER_API_KEY": API_KEY,
        }
        server, base = start_service(
            tmp_path, database_url, SVC_CI_WEBHOOK_SECRET=CI_SECRET, SVC_BASIC_AUTH=BASIC, **outbound
        )
        jobs = jobs_process(tmp_path, database_url, SVC_BAY_WIPE_COMMAND=wiper.command_line, **outbound)
        try:
            cancelled_ticket_on_a_bay(base)
            wait_until(lambda: wiper.started("bay-1"), timeout=30, what="the slot release's bay wipe to start")
            with connection():
                beat_before = job_state.last_beat()
            notify = requests.post(
                base + "/api/v1/agents/writing/notify",
                json={"status": "STOP_NEED_TOPICS", "missing": 2, "items": []},
                headers={"X-Svc-CI-Secret": CI_SECRET},
                timeout=10,
            )
            assert notify.status_code == 200 and notify.json()["chat"] == "queued"
            port2 = {"key": "PORT-2", "initiative_id": "port", "title": "Logout", "tracker_issue_id": "ENG-12"}
            assert person().post(base + "/api/v1/tickets", json=port2).status_code == 201
            assert person().post(base + "/api/v1/tickets/PORT-2/mark_done").status_code == 200

            (post,) = wait_until(lambda: discord.contents(), timeout=30, what="the notify's chat post")
            assert wiper.wiped == []  # the wipe command has not exited: the post did not wait for it
            wait_until(lambda: linear.find("ENG-12").state.type == "completed", timeout=30, what="the tracker close")
            assert wiper.wiped == []

            def beat_again():
                with connection():
                    return job_state.last_beat() > beat_before

            wait_until(beat_again, timeout=30, what="a heartbeat during the wipe")
            health = person().get(base + "/api/v1/ops/snapshot", timeout=10)
            assert wiper.wiped == []  # still wiping
            assert release_message().status == outbox.PENDING

            wiper.release()
            wait_until(lambda: release_message().status == outbox.SENT, timeout=30, what="the slot release")
        finally:
            code = jobs.stop()
            server.stop()
    assert code == 0
    assert post.startswith("🛑 Writing stopped: 2 articles missing")
    jobs_health = health.json()["health"]["checks"]["jobs"]
    assert jobs_health["ok"] is True and jobs_health["detail"].startswith("jobs process alive"), jobs_health
    assert wiper.wiped == ["bay-1"]
    with connection():
        assert slots.claim_of("bay-1") is None


def test_sigterm_during_a_wipe_finishes_it_and_records_its_run(app, tmp_path, database_url):
    wiper = BayWiper(tmp_path / "bays")
    wiper.hold()
    server, base = start_service(tmp_path, database_url, SVC_CI_WEBHOOK_SECRET=CI_SECRET, SVC_BASIC_AUTH=BASIC)
    jobs = jobs_process(tmp_path, database_url, SVC_BAY_WIPE_COMMAND=wiper.command_line)
    try:
        cancelled_ticket_on_a_bay(base)
        wait_until(lambda: wiper.started("bay-1"), timeout=30, what="the slot release's bay wipe to start")
        jobs.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: "stopping after the work in hand" in jobs.output(), what="the jobs process to take SIGTERM")
        # Every other worker has stopped; the one wiping cannot before the wipe command exits.
        assert jobs.proc.poll() is None and wiper.wiped == []
        wiper.release()
        assert jobs.proc.wait(timeout=60) == 0
    finally:
        jobs.stop()
        server.stop()
    assert wiper.wiped == ["bay-1"]
    assert "jobs process stopped" in jobs.output()
    message = release_message()
    assert message.status == outbox.SENT and message.attempts == 1
    with connection():
        assert slots.claim_of("bay-1") is None
        (steward,) = runs.latest("slot-steward", 10)
    assert steward.status == "RELEASED" and steward.ok
    assert [s["slot"] for s in steward.details["slots"]] == ["bay-1"]
    assert steward.details["ticket"] == "PORT-1"
