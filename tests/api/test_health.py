"""GET /healthz: every check with a detail; 503 only when this process cannot serve (the database, the disk),
never because the jobs process is down; a failing check shows on the board's agents strip."""

from __future__ import annotations

import pytest

from domain.outage import DatabaseOutage
from jobs.process import JobsProcess
from storage.db import DISK

from testclient import ApiClient

pytestmark = pytest.mark.both_backends

OWN_SECRETS = dict(
    github_webhook_secret="github-secret-0123456789abcdef",
    gitlab_webhook_token="gitlab-token-0123456789abcdef",
)


def client(app_factory, config_factory, outage=None, **overrides):
    app = app_factory(config_factory(**{**OWN_SECRETS, **overrides}), outage=outage)
    return ApiClient(app, basic="admin:correct-horse-battery", ci_secret="test-ci-secret-0123456789abcdef")


def test_health_lists_every_check_and_is_ok_when_all_pass(app_factory, config_factory, clock):
    api = client(app_factory, config_factory)
    JobsProcess(clock, {}).heartbeat()
    result = api.get("/healthz", auth=None)
    assert result.status_code == 200
    assert result.json["status"] == "ok", result.json
    assert set(result.json["checks"]) == {"database", "disk", "jobs", "outbox", "forge_secret"}
    assert all(check["ok"] is True and check["detail"] for check in result.json["checks"].values())


def test_a_jobs_process_that_is_down_degrades_health_but_the_api_stays_in(app_factory, config_factory):
    api = client(app_factory, config_factory)
    result = api.get("/healthz", auth=None)  # no jobs process has ever beaten
    assert result.status_code == 200
    assert result.json["status"] == "degraded"
    assert result.json["checks"]["jobs"]["ok"] is False
    assert "no jobs process" in result.json["checks"]["jobs"]["detail"]
    # ...and the board says so on its agents strip.
    board = api.get("/", headers={"Accept": "text/html"})
    assert board.status_code == 200
    assert 'data-check="jobs"' in board.text and "Service degraded" in board.text


def test_a_full_disk_is_named_and_answers_503(app_factory, config_factory, clock):
    outage = DatabaseOutage()
    # The backend by this test's own database, not by what an earlier test in this worker left bound.
    if not config_factory().database_url.startswith("sqlite"):
        api = client(app_factory, config_factory, outage=outage)
        # The heartbeat first: a write that commits ends an outage, so it must not come after the refused one.
        JobsProcess(clock, {}).heartbeat()
        # PostgreSQL's disk is on its server; what this process sees of it is a write refused for it.
        outage.failed(DISK, "PostgreSQL: could not extend file: No space left on device")
        expected = "No space left on device"
    else:
        # What a full disk leaves: less space than the minimum (here, more than any disk has).
        api = client(app_factory, config_factory, outage=outage, min_free_disk_mb=1 << 40)
        JobsProcess(clock, {}).heartbeat()
        expected = "disk nearly full"
    result = api.get("/healthz", auth=None)
    assert result.status_code == 503, result.json
    assert result.json["status"] == "failing"
    disk = result.json["checks"]["disk"]
    assert disk["ok"] is False and expected in disk["detail"]
    assert result.json["checks"]["database"]["ok"] is True  # it still reads
    board = api.get("/", headers={"Accept": "text/html"})
    assert 'data-check="disk"' in board.text and "Service failing" in board.text


def test_writes_failing_just_now_fail_the_database_check(app_factory, config_factory, clock):
    outage = DatabaseOutage()
    api = client(app_factory, config_factory, outage=outage)
    JobsProcess(clock, {}).heartbeat()
    outage.failed("cannot-write", "SQLite: database is locked")
    result = api.get("/healthz", auth=None)
    assert result.status_code == 503
    assert "database is locked" in result.json["checks"]["database"]["detail"]


def test_a_database_that_cannot_be_reached_fails_health_and_says_what_is_not_known(config_factory, clock):
    from domain.health import health
    from storage import db as storage_db

    # A PostgreSQL server on a port where nothing listens: the database is unreachable.
    config = config_factory(**OWN_SECRETS)
    storage_db.bind(storage_db.open_database("postgresql://127.0.0.1:9/nowhere?connect_timeout=2"))
    try:
        found = health(config, clock(), DatabaseOutage())
    finally:
        storage_db.db.obj.close_all() if hasattr(storage_db.db.obj, "close_all") else storage_db.db.obj.close()
        storage_db.db.initialize(None)
    assert found.status == "failing"
    assert set(found.checks) == {"database", "disk", "jobs", "outbox", "forge_secret"}
    assert found.checks["database"]["ok"] is False and "unreachable" in found.checks["database"]["detail"]
    for name in ("jobs", "outbox"):
        assert found.checks[name] == {
            "ok": False,
            "detail": f"{'jobs heartbeat' if name == 'jobs' else 'outbox backlog'} not known while the database "
            "cannot be read",
        }
