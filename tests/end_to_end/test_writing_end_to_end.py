"""The writing agent end to end with real processes: `svc notify` against `svc serve`, and the chat post
delivered by `svc jobs` to a local server shaped like Discord's webhook endpoint."""

import json
import subprocess

import pytest
import requests

from processes import SVC, ServiceProcess, free_port, start_service, svc_env, wait_until
from servers.discord import FakeDiscord

pytestmark = pytest.mark.process

SECRET = "e2e-ci-secret-0123456789abcdef"
BASIC = "admin:e2e-password-123"


@pytest.fixture
def service(tmp_path, database_url):
    server, base = start_service(tmp_path, database_url, SVC_CI_WEBHOOK_SECRET=SECRET, SVC_BASIC_AUTH=BASIC)
    yield base
    server.stop()


def svc_notify(*args, **env):
    """`svc notify ...` as the content repository runs it."""
    return subprocess.run(
        [SVC, "notify", *args], env=svc_env(**env), capture_output=True, text=True, timeout=60, check=False
    )


def writing_ticket(base):
    return requests.get(base + "/api/v1/tickets/WRITING-DAILY", auth=tuple(BASIC.split(":")), timeout=5)


def test_svc_notify_reports_and_the_ticket_moves(service):
    items = [{"date": "2026-11-19", "slug": "late-post", "title": "Late post"}]
    done = svc_notify(
        "BACKFILL_READY",
        "--missing",
        "1",
        "--items",
        json.dumps(items),
        SVC_CI_WEBHOOK_SECRET=SECRET,
        SVC_BASE_URL=service,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "notify: BACKFILL_READY recorded on WRITING-DAILY (execute, waiting on agent); chat post queued"
    )
    ticket = writing_ticket(service).json()
    assert (ticket["stage"], ticket["waiting_on"]) == ("execute", "agent")
    assert ticket["timeline"][0]["data"]["missing"] == 1


def test_svc_notify_with_the_wrong_secret_is_refused_with_exit_code_1(service):
    done = svc_notify("SUCCESS", SVC_CI_WEBHOOK_SECRET="not-the-secret-0123456789", SVC_BASE_URL=service)
    assert done.returncode == 1
    assert "refused the CI secret (401)" in done.stderr
    assert writing_ticket(service).status_code == 404


@pytest.mark.parametrize("switch", ["SVC_WRITING_NOTIFY", "WRITING_AUTOMATION"])
def test_svc_notify_switched_off_sends_nothing_and_exits_0(service, switch):
    done = svc_notify("SUCCESS", SVC_CI_WEBHOOK_SECRET=SECRET, SVC_BASE_URL=service, **{switch: "0"})
    assert done.returncode == 0 and "switched off" in done.stderr
    assert writing_ticket(service).status_code == 404


def test_svc_notify_exit_codes_for_bad_input_and_an_unreachable_service(service):
    assert svc_notify("SUCCESS", SVC_BASE_URL=service).returncode == 2  # no secret
    bad_items = svc_notify("SUCCESS", "--items", "{not json", SVC_CI_WEBHOOK_SECRET=SECRET, SVC_BASE_URL=service)
    assert bad_items.returncode == 2 and "--items" in bad_items.stderr
    invalid = svc_notify(
        "SUCCESS", "--items", '[{"date": "2026-13-01"}]', SVC_CI_WEBHOOK_SECRET=SECRET, SVC_BASE_URL=service
    )
    assert invalid.returncode == 1 and "/items/0/date" in invalid.stderr
    gone = svc_notify(
        "SUCCESS", "--attempts", "1", SVC_CI_WEBHOOK_SECRET=SECRET, SVC_BASE_URL=f"http://127.0.0.1:{free_port()}"
    )
    assert gone.returncode == 3 and "could not connect" in gone.stderr


def test_the_same_key_twice_counts_once(service):
    args = ("FAIL_QA", "--idempotency-key", "ci-777-finalize")
    for _ in range(2):
        assert svc_notify(*args, SVC_CI_WEBHOOK_SECRET=SECRET, SVC_BASE_URL=service).returncode == 0
    runs = requests.get(
        service + "/api/v1/agents/runs?agent_id=writing-daily", headers={"X-Svc-CI-Secret": SECRET}, timeout=5
    ).json()["runs"]
    assert [r["status"] for r in runs] == ["FAIL_QA"]


def test_a_report_reaches_the_chat_channel_once_through_the_jobs_process(tmp_path, database_url):
    with FakeDiscord() as discord:
        env = {"SVC_CI_WEBHOOK_SECRET": SECRET, "SVC_BASIC_AUTH": BASIC, "DISCORD_WEBHOOK_URL": discord.url}
        server, base = start_service(tmp_path, database_url, **env)
        # The ops agents are left to an external cron: nothing scheduled runs here, whatever the time of day.
        jobs_env = svc_env(
            SVC_DATA_DIR=str(tmp_path / "data"), DATABASE_URL=database_url, SVC_OPS_SCHEDULER="external", **env
        )
        jobs = ServiceProcess(["jobs"], jobs_env, tmp_path / "jobs.log").start()
        try:
            items = json.dumps([{"slug": "hello-world", "title": "Hello, @everyone"}])
            done = svc_notify("SUCCESS", "--items", items, SVC_CI_WEBHOOK_SECRET=SECRET, SVC_BASE_URL=base)
            assert done.returncode == 0, done.stderr
            wait_until(lambda: discord.messages, timeout=30, what="the chat post to reach the webhook")

            (message,) = discord.messages
            assert message["content"].startswith("✅ Writing: batch finalized and published: Hello, @everyone")
            assert message["allowed_mentions"] == {"parse": []}

            def outbox_view():
                shown = subprocess.run(
                    [SVC, "outbox", "--kind", "chat"], env=jobs_env, capture_output=True, text=True, timeout=60
                )
                return shown.stdout if " sent " in shown.stdout else None

            listing = wait_until(outbox_view, timeout=20, what="`svc outbox` to show the post as sent")
            (row,) = [line for line in listing.splitlines()[1:] if line.strip()]
            assert row.split()[1:4] == ["chat", "sent", "1"]
        finally:
            jobs.stop()
            server.stop()
        assert len(discord.messages) == 1  # once, even after the jobs process drained again and stopped
        assert discord.token not in jobs.output() and discord.token not in server.output()
