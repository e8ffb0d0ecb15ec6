"""The daily pulse: what it checks, when it posts to chat, and that it runs the slot steward."""

from datetime import UTC, datetime, timedelta

import pytest

from domain.ops.agents import OpsAgents
from domain.ops.pulse import staging_from_record, staging_record
from domain.ops.runs import Trigger
from integrations.staging import StagingResult
from jobs import assembly
from jobs.process import JobsProcess
from storage import outbox
from storage.db import connection, transaction

from board import BoardClient
from servers.bays import BayWiper
from servers.staging import Certificates, StagingSite


@pytest.fixture
def wiper(tmp_path):
    return BayWiper(tmp_path / "bays")


@pytest.fixture
def config(config_factory, wiper):
    return config_factory(bay_wipe_command=wiper.command)


@pytest.fixture
def board(api):
    return BoardClient(api)


@pytest.fixture
def healthy(app, clock):
    """A jobs process that has just beaten: the pulse's health check is clean."""
    JobsProcess(clock, {}).heartbeat()


def pulse(config, clock, **kw):
    return OpsAgents(config, clock).pulse(Trigger("schedule"), **kw)


def chat_posts() -> list[str]:
    with connection():
        return [m.payload["content"] for m in outbox.recent(kind="chat")]


def checks(report) -> list[str]:
    return [i.check for i in report.issues]


def test_all_clear_posts_nothing_and_says_staging_was_skipped(config, clock, healthy):
    report = pulse(config, clock)
    assert report.issues == [] and report.posted is False
    assert chat_posts() == []
    assert report.run.status == "ALL_CLEAR" and report.run.ok
    assert report.run.details["checks"]["staging"]["skipped"] is True
    assert "check skipped (SVC_STAGING_URL is not set)" in report.message


@pytest.mark.parametrize(
    ("mode", "always_env", "posted"),
    [("always", False, True), (None, True, True), ("never", True, False), ("auto", True, False)],
)
def test_when_all_is_clear_only_always_posts(config_factory, wiper, app, clock, healthy, mode, always_env, posted):
    config = config_factory(bay_wipe_command=wiper.command, ops_pulse_always=always_env)
    report = pulse(config, clock, post_to_chat=mode)
    assert report.posted is posted
    assert len(chat_posts()) == (1 if posted else 0)
    if posted:
        assert chat_posts()[0].startswith("**Daily pulse, Fri 20 Nov 2026: all clear**")


def test_issues_are_posted_in_auto_mode_and_never_with_never(board, config, clock, healthy):
    board.ticket("PORT-1", stage="human_test")  # needs you
    silent = pulse(config, clock, post_to_chat="never")
    assert checks(silent) == ["needs_you"] and silent.posted is False
    assert chat_posts() == []
    loud = pulse(config, clock)
    assert loud.posted is True
    (post,) = chat_posts()
    assert post.splitlines()[0] == "**Daily pulse, Fri 20 Nov 2026: 1 issue(s)**"
    assert "- needs_you: 1 ticket(s) need you: PORT-1 (human_test for 0 s)" in post
    assert loud.run.status == "ISSUES_FOUND" and loud.run.details["posted"] is True


@pytest.mark.both_backends
def test_stuck_means_no_stage_change_for_longer_than_the_soak_or_blocked(board, config, clock, healthy):
    board.ticket("PORT-1", stage="execute")
    board.ticket("PORT-2", stage="blocked")
    board.ticket("PORT-3", stage="done")
    clock.advance(hours=47)
    board.ticket("PORT-4", stage="queued")
    JobsProcess(clock, {}).heartbeat()
    report = pulse(config, clock)
    assert [i.detail for i in report.issues if i.check == "stuck"] == [
        "1 ticket(s) blocked or without a stage change for more than 48 h: PORT-2 (blocked for 47 h)"
    ]
    clock.advance(hours=2)  # PORT-1 has sat in execute for 49 h
    report = pulse(config, clock)
    (stuck,) = [i.detail for i in report.issues if i.check == "stuck"]
    assert stuck.startswith("2 ticket(s)") and "PORT-1 (execute for 2 d)" in stuck and "PORT-4" not in stuck


def test_the_soak_is_configurable(config_factory, wiper, board, clock):
    board.ticket("PORT-1", stage="ci")
    assembly.build(config_factory(), clock).drain()  # what svc jobs does: route the board's events
    clock.advance(hours=3)
    JobsProcess(clock, {}).heartbeat()
    report = pulse(config_factory(bay_wipe_command=wiper.command, stuck_after_hours=2), clock)
    assert checks(report) == ["stuck"]


@pytest.mark.parametrize(
    ("spent", "locked", "issue"),
    [
        (79.9, False, None),
        (80.0, False, "80.0 % of the budget used"),
        (10.0, True, "the wallet is locked (10.0 % used)"),
    ],
)
def test_the_wallet_is_an_issue_at_80_percent_or_when_locked(api, config, clock, healthy, spent, locked, issue):
    api.put("/api/v1/wallet", json={"budget": 100, "spent": spent, "locked": locked})
    report = pulse(config, clock)
    assert [i.detail for i in report.issues if i.check == "wallet"] == ([issue] if issue else [])


@pytest.mark.both_backends
def test_service_health_no_jobs_process_and_an_overdue_outbox(app, config, clock):
    with connection(), transaction():
        outbox.enqueue("chat", {"content": "stuck in the outbox"}, at=clock())
    clock.advance(minutes=20)
    report = pulse(config, clock, post_to_chat="never")
    details = {i.check: i.detail for i in report.issues}
    assert details["jobs"] == "no jobs process has ever reported: chat posts and tracker closes are not delivered"
    assert details["outbox"] == "1 outbox message(s) pending, the oldest for 20 min"
    assert report.run.details["checks"]["database"] == {"ok": True, "detail": "database reachable"}
    # /healthz's checks, all of them, beside what only the pulse looks at.
    assert set(report.run.details["checks"]) == {
        *("database", "disk", "jobs", "outbox", "forge_secret"),
        *("stuck", "needs_you", "wallet", "staging"),
    }
    assert report.run.details["checks"]["disk"]["ok"] and report.run.details["checks"]["forge_secret"]["ok"]

    JobsProcess(clock, {}).heartbeat()
    clock.advance(minutes=3)
    stale = pulse(config, clock, post_to_chat="never")
    assert {i.check: i.detail for i in stale.issues}["jobs"].startswith("no jobs process heartbeat for 3 min")


def test_the_pulse_runs_the_slot_steward(board, config, clock, healthy, wiper):
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    board.cancel("PORT-1")  # its slot_release is not delivered here: no jobs process in this test
    report = pulse(config, clock)
    assert [(o.slot, o.ticket) for o in report.steward.released] == [("bay-1", "PORT-1")]
    assert wiper.wiped == ["bay-1"]
    assert report.issues == []
    steward_run = report.steward.run
    assert steward_run.agent_id == "slot-steward" and steward_run.details["trigger"] == "pulse"
    assert report.run.details["steward_run"] == steward_run.id


def test_a_failed_wipe_during_the_pulse_is_an_issue(board, config, clock, healthy, wiper):
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    board.mark_done("PORT-1")
    wiper.fail("bay-1")
    report = pulse(config, clock)
    assert [i.detail for i in report.issues] == ["wipe of bay bay-1 (PORT-1) failed: exited with 7"]
    assert report.posted


# -- staging, against real local HTTPS sites ----------------------------------------------------------------


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    return Certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture
def real_now(clock):
    # The test certificates are dated by the real clock; the pulse must judge their expiry by the same.
    clock.move_to(datetime.now(UTC))


def staging_config(config_factory, wiper, certificates, site):
    return config_factory(bay_wipe_command=wiper.command, staging_url=site.url, staging_ca_file=certificates.ca_file)


def test_a_healthy_staging_site_is_no_issue(config_factory, wiper, certificates, real_now, app, clock, healthy):
    with StagingSite(certificates.trusted) as site:
        report = pulse(staging_config(config_factory, wiper, certificates, site), clock)
    assert report.issues == []
    assert report.staging.ok and report.staging.status == 200
    assert f"Staging: {site.url} OK: answered 200; certificate valid for" in report.message


@pytest.mark.parametrize(
    ("leaf", "status", "expected"),
    [
        ("untrusted", 200, "certificate not trusted"),
        ("expiring", 200, "certificate expires in"),
        ("trusted", 503, "answered 503"),
    ],
)
def test_a_failing_staging_site_is_an_issue(
    config_factory, wiper, certificates, real_now, app, clock, healthy, leaf, status, expected
):
    with StagingSite(getattr(certificates, leaf), status=status) as site:
        report = pulse(staging_config(config_factory, wiper, certificates, site), clock)
    (issue,) = report.issues
    assert issue.check == "staging" and expected in issue.detail
    assert report.posted
    assert "Staging: " + site.url + " FAILING" in chat_posts()[0]


def test_the_last_staging_check_is_remembered_for_the_snapshot(
    config_factory, wiper, certificates, real_now, app, clock, healthy
):
    with StagingSite(certificates.trusted, status=500) as site:
        pulse(staging_config(config_factory, wiper, certificates, site), clock)
    from domain.ops.pulse import last_staging

    with connection():
        remembered = last_staging()
    assert remembered.url == site.url and remembered.status == 500 and not remembered.ok
    assert remembered.checked_at - clock() < timedelta(seconds=1)


def test_while_writing_automation_is_off_the_writing_ticket_is_not_counted_stuck(api, board, config, clock):
    # As the Needs-you list already leaves it out: with automation off nobody is meant to move it.
    board.ticket("PORT-1", stage="execute")
    assert api.post("/api/v1/agents/writing/notify", auth="ci", json={"status": "FAIL_QA"}).status_code == 200
    clock.advance(hours=49)
    JobsProcess(clock, {}).heartbeat()

    def stuck_now() -> tuple[str | None, int]:
        report = pulse(config, clock)
        detail = next((i.detail for i in report.issues if i.check == "stuck"), None)
        return detail, api.get("/api/v1/ops/snapshot").json["counts"]["stuck"]

    detail, counted = stuck_now()
    assert counted == 2 and detail.startswith("2 ticket(s)") and "WRITING-DAILY (execute for 2 d)" in detail
    assert api.post("/api/v1/agents/writing/automation", json={"enabled": False}).status_code == 200
    detail, counted = stuck_now()
    assert counted == 1 and detail.startswith("1 ticket(s)") and "WRITING-DAILY" not in detail
    assert "PORT-1 (execute for 2 d)" in detail
    assert api.post("/api/v1/agents/writing/automation", json={"enabled": True}).status_code == 200
    detail, counted = stuck_now()
    assert counted == 2 and "WRITING-DAILY (execute for 2 d)" in detail


def test_a_staging_check_survives_being_kept():
    checked = datetime(2026, 11, 20, 8, 0, 0, 123456, tzinfo=UTC)
    result = StagingResult(checked, "https://s.example", False, False, "answered 503", 503, checked + timedelta(3), 3.0)
    assert staging_from_record(staging_record(result)) == result
    assert staging_record(result)["certificate_expires_at"] == "2026-11-23T08:00:00.123456Z"
