"""The ops endpoints: shapes (checked against the OpenAPI document by the client), credentials, bodies."""

import pytest

from domain.outage import DatabaseOutage
from jobs.process import JobsProcess
from storage import outbox, runs, settings
from storage.db import connection, transaction

from board import BoardClient
from conftest import BASIC, CI_SECRET
from processes import free_port
from servers.bays import BayWiper
from testclient import ApiClient


@pytest.fixture
def wiper(tmp_path):
    return BayWiper(tmp_path / "bays")


@pytest.fixture
def config(config_factory, wiper):
    return config_factory(bay_wipe_command=wiper.command, staging_url=f"https://127.0.0.1:{free_port()}/")


@pytest.fixture
def board(api):
    return BoardClient(api)


def recorded() -> tuple[int, int]:
    """(agent runs, chat posts) recorded so far."""
    with connection():
        return len(runs.page(agent_id=None, limit=500)[0]), len(outbox.recent(kind="chat"))


def test_the_pulse_answers_what_it_found_and_queues_the_post(api, board, wiper):
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    board.cancel("PORT-1")
    result = api.post("/api/v1/ops/pulse")
    assert result.status_code == 200
    body = result.json
    assert {i["check"] for i in body["issues"]} == {"jobs", "staging"}
    assert body["posted"] is True  # queued in the outbox, not sent by the request
    assert body["steward"] == {"released": [{"slot": "bay-1", "ticket": "PORT-1"}]}
    assert body["run"]["agent_id"] == "ops-daily-pulse" and body["run"]["status"] == "ISSUES_FOUND"
    assert body["run"]["details"]["trigger"] == "api" and body["run"]["details"]["actor"] == "admin"
    with connection():
        (post,) = outbox.recent(kind="chat")
    assert post.status == "pending" and post.payload["source"] == "pulse"


def test_post_to_chat_never_posts_nothing(api):
    body = api.post("/api/v1/ops/pulse", json={"post_to_chat": "never"}).json
    assert body["issues"] and body["posted"] is False
    assert recorded()[1] == 0


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/ops/pulse", {"post_to_chat": "loudly"}),
        ("/api/v1/ops/pulse", {"post_to_chat": "always", "extra": 1}),
        ("/api/v1/ops/weekly-digest", {"message": "hi"}),
        ("/api/v1/ops/slot-steward", {"ticket": "PORT-1"}),
        ("/api/v1/ops/idle-reclaim", {"all": True}),
    ],
)
def test_a_body_that_breaks_its_schema_is_422_and_runs_nothing(api, path, body):
    result = api.post(path, json=body)
    assert result.status_code == 422
    assert result.json["errors"]
    assert recorded() == (0, 0)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/v1/ops/pulse"),
        ("POST", "/api/v1/ops/weekly-digest"),
        ("POST", "/api/v1/ops/slot-steward"),
        ("POST", "/api/v1/ops/idle-reclaim"),
        ("GET", "/api/v1/ops/snapshot"),
    ],
)
def test_every_ops_endpoint_needs_basic_credentials(api, method, path):
    result = api.request(method, path, auth=None, json={} if method == "POST" else None)
    assert result.status_code == 401
    assert result.headers["WWW-Authenticate"].startswith('Basic realm="svc"')
    ci = api.request(method, path, auth="ci", json={} if method == "POST" else None)
    assert ci.status_code == 401
    assert recorded() == (0, 0)


def test_the_weekly_digest_answers_its_message(api, board):
    board.ticket("PORT-1")
    board.mark_done("PORT-1")
    body = api.post("/api/v1/ops/weekly-digest", json={}).json
    assert body["posted"] is True
    assert "- PORT-1 Work on PORT-1" in body["message"]
    assert body["run"]["agent_id"] == "ops-weekly-digest"
    with connection():
        assert outbox.recent(kind="chat")[0].payload["content"] == body["message"]


def test_the_slot_steward_endpoint_releases_finished_tickets_slots(api, board, wiper):
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    board.mark_done("PORT-1")
    body = api.post("/api/v1/ops/slot-steward", json={}).json
    assert body["released"] == [{"slot": "bay-1", "ticket": "PORT-1"}]
    assert body["run"]["status"] == "RELEASED"
    assert api.post("/api/v1/ops/slot-steward").json["released"] == []


def test_the_idle_reclaim_endpoint_wipes_idle_bays(api, board, clock, wiper):
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    board.cancel("PORT-1")
    api.post("/api/v1/ops/slot-steward")  # released and wiped now; not idle again until someone uses it
    board.ticket("PORT-2")
    board.claim("bay-2", "PORT-2")
    board.move("PORT-2", "ci")
    clock.advance(hours=25)
    body = api.post("/api/v1/ops/idle-reclaim", json={}).json
    assert body["wiped"] == []  # bay-1 is clean, bay-2 is held by a live ticket
    assert "bay-2 (held by PORT-2 (ci)" in body["run"]["summary"]


def test_the_snapshot_shows_the_board_at_once(api, board, clock):
    board.ticket("PORT-1", stage="human_test")
    board.ticket("PORT-2", stage="blocked")
    board.ticket("WRITING-DAILY", stage="execute")
    board.claim("bay-1", "PORT-1")
    api.put("/api/v1/wallet", json={"budget": 10, "spent": 9, "locked": False})
    JobsProcess(clock, {}).heartbeat()

    snap = api.get("/api/v1/ops/snapshot").json

    assert snap["generated_at"] == "2026-11-20T10:00:00.000000Z"
    assert snap["health"]["status"] == "ok"
    assert set(snap["health"]["checks"]) == {"database", "disk", "jobs", "outbox", "forge_secret"}
    assert all(check["ok"] for check in snap["health"]["checks"].values())
    assert snap["counts"]["by_stage"]["human_test"] == 1 and snap["counts"]["by_stage"]["done"] == 0
    # A blocked ticket needs someone too (a pull request closed without merge, a fixer's budget spent).
    assert snap["counts"]["needs_you"] == 2 and snap["counts"]["blocked"] == 1 and snap["counts"]["stuck"] == 1
    assert [t["key"] for t in snap["needs_you"]] == ["PORT-1", "PORT-2"]
    assert [a["agent_id"] for a in snap["agents"]][:3] == ["writing-daily", "ops-daily-pulse", "ops-weekly-digest"]
    assert snap["automation"] == {"enabled": True, "updated_at": None, "updated_by": None}
    assert snap["slots"] == [api.get("/api/v1/slots").json["slots"][0]]
    assert snap["wallet"]["percent_used"] == 90.0
    assert snap["staging"]["configured"] is True and snap["staging"]["last_check"] is None


def test_the_snapshot_and_the_pulse_report_healthz_checks(app_factory, config_factory, clock):
    """One source: what /healthz says is what the snapshot's health says and what the pulse counts as issues,
    this process's failed writes included."""
    outage = DatabaseOutage()
    # GitHub and GitLab verified with one value (the older shared secret): a check only /healthz used to make.
    config = config_factory(forge_webhook_secret="one-secret-for-both-forges-0123456789")
    api = ApiClient(app_factory(config, outage=outage), basic=BASIC, ci_secret=CI_SECRET)
    JobsProcess(clock, {}).heartbeat()
    outage.failed("cannot-write", "SQLite: database is locked")

    healthz = api.get("/healthz", auth=None).json["checks"]
    snap = api.get("/api/v1/ops/snapshot").json["health"]
    pulse = api.post("/api/v1/ops/pulse", json={"post_to_chat": "never"}).json

    assert set(snap["checks"]) == set(healthz) == {"database", "disk", "jobs", "outbox", "forge_secret"}
    assert {name: check["ok"] for name, check in snap["checks"].items()} == {
        name: check["ok"] for name, check in healthz.items()
    }
    assert snap["status"] == "failing"
    assert snap["checks"]["database"]["detail"] == healthz["database"]["detail"]
    assert "writes fail: SQLite: database is locked" in snap["checks"]["database"]["detail"]
    issues = {i["check"]: i["detail"] for i in pulse["issues"]}
    assert issues["database"] == healthz["database"]["detail"]
    assert issues["forge_secret"] == healthz["forge_secret"]["detail"]
    assert "GitHub's HMAC key and GitLab's token are one value" in issues["forge_secret"]


def test_the_snapshot_shows_the_last_staging_check_without_making_one(api, config):
    api.post("/api/v1/ops/pulse", json={"post_to_chat": "never"})
    last = api.get("/api/v1/ops/snapshot").json["staging"]["last_check"]
    assert last["url"] == config.staging_url and last["ok"] is False
    assert last["detail"].startswith("unreachable")
    assert last["checked_at"] == "2026-11-20T10:00:00.000000Z"


def test_the_snapshot_hides_the_writing_ticket_while_automation_is_off(api, board, clock):
    from domain.automation import SETTING_KEY
    from machines.stages import WRITING_TICKET_KEY

    board.ticket(WRITING_TICKET_KEY, stage="human_test")
    assert api.get("/api/v1/ops/snapshot").json["counts"]["needs_you"] == 1
    with connection(), transaction():
        settings.put(SETTING_KEY, {"enabled": False}, at=clock(), by="admin")
    snap = api.get("/api/v1/ops/snapshot").json
    assert snap["counts"]["needs_you"] == 0 and snap["needs_you"] == []
    assert snap["automation"] == {"enabled": False, "updated_at": "2026-11-20T10:00:00.000000Z", "updated_by": "admin"}


def test_the_snapshot_is_rendered_once_per_max_age(app_factory, config_factory, clock):
    from testclient import ApiClient

    api = ApiClient(
        app_factory(config_factory(snapshot_max_age=2.0)),
        basic="admin:correct-horse-battery",
        ci_secret="test-ci-secret-0123456789abcdef",
    )
    first = api.get("/api/v1/ops/snapshot")
    assert first.headers["cache-control"] == "private, max-age=2"
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port"})
    api.post("/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "port", "title": "t"})
    clock.advance(seconds=1)
    again = api.get("/api/v1/ops/snapshot").json
    assert again == first.json  # the same rendering, generated_at included
    clock.advance(seconds=1)
    fresh = api.get("/api/v1/ops/snapshot").json
    assert fresh["counts"]["by_stage"]["agreement"] == 1
    assert fresh["generated_at"] > first.json["generated_at"]


def test_with_max_age_zero_every_request_renders_the_snapshot(api):
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port"})
    assert api.get("/api/v1/ops/snapshot").json["counts"]["by_stage"]["agreement"] == 0
    api.post("/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "port", "title": "t"})
    assert api.get("/api/v1/ops/snapshot").json["counts"]["by_stage"]["agreement"] == 1


def test_a_clock_stepped_back_renders_the_snapshot_anew(app_factory, config_factory, clock):
    from testclient import ApiClient

    api = ApiClient(
        app_factory(config_factory(snapshot_max_age=30.0)),
        basic="admin:correct-horse-battery",
        ci_secret="test-ci-secret-0123456789abcdef",
    )
    first = api.get("/api/v1/ops/snapshot").json
    clock.advance(minutes=-10)
    assert api.get("/api/v1/ops/snapshot").json["generated_at"] < first["generated_at"]
