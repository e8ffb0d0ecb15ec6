"""GET /api/v1/agents/runs: run history, newest first, keyset-paged."""

from datetime import timedelta

import pytest

from storage import runs
from storage.db import connection, transaction

pytestmark = pytest.mark.both_backends

RUNS = "/api/v1/agents/runs"


def record(clock, agent_id, status, count=1):
    with connection(), transaction():
        for _ in range(count):
            clock.advance(minutes=1)
            runs.record(
                agent_id, status=status, ok=True, started_at=clock(), finished_at=clock() + timedelta(seconds=1)
            )


def test_runs_of_one_agent_newest_first_in_pages(api, clock):
    record(clock, "writing-daily", "SUCCESS", 3)
    record(clock, "ops-daily-pulse", "OK", 2)
    record(clock, "writing-daily", "FAIL_QA")

    first = api.get(RUNS + "?agent_id=writing-daily&limit=3", auth="ci").json
    assert [r["status"] for r in first["runs"]] == ["FAIL_QA", "SUCCESS", "SUCCESS"]
    assert first["next"] is not None
    second = api.get(RUNS + f"?agent_id=writing-daily&limit=3&cursor={first['next']}", auth="ci").json
    assert [r["status"] for r in second["runs"]] == ["SUCCESS"] and second["next"] is None
    started = [r["started_at"] for r in first["runs"] + second["runs"]]
    assert started == sorted(started, reverse=True)
    assert {r["agent_id"] for r in first["runs"] + second["runs"]} == {"writing-daily"}


def test_without_agent_id_every_agents_runs_are_listed(api, clock):
    record(clock, "writing-daily", "SUCCESS")
    record(clock, "idle-reclaim", "OK")
    assert [r["agent_id"] for r in api.get(RUNS).json["runs"]] == ["idle-reclaim", "writing-daily"]


def test_a_run_has_the_contracts_fields(api, clock):
    api.post("/api/v1/agents/writing/notify", auth="ci", json={"status": "SKIP_ALL_CAUGHT_UP", "missing": 0})
    (run,) = api.get(RUNS + "?agent_id=writing-daily", auth="basic").json["runs"]
    assert set(run) == {"id", "agent_id", "status", "ok", "started_at", "finished_at", "summary", "details"}
    assert run["summary"] == "SKIP_ALL_CAUGHT_UP; 0 missing"
    assert run["details"]["trigger"] == "notify"


def test_bad_parameters_are_400(api):
    assert api.get(RUNS + "?agent_id=nobody", auth="ci").status_code == 400
    assert api.get(RUNS + "?cursor=garbage", auth="ci").status_code == 400
    assert api.get(RUNS + "?limit=501", auth="ci").status_code == 400


def test_run_history_needs_the_ci_secret_or_basic_credentials(api):
    assert api.get(RUNS, auth=None).status_code == 401
    assert api.get(RUNS, auth=None, headers={"X-Svc-CI-Secret": "not-the-secret-at-all"}).status_code == 401
    assert api.get(RUNS, auth="ci").status_code == 200
    assert api.get(RUNS, auth="basic").status_code == 200
