"""`svc demo` as a person runs it: it refuses a database that holds tickets, and `--force` replaces them."""

import json
import subprocess

import pytest

from processes import SVC, svc_env

pytestmark = pytest.mark.process


def demo(database_url: str, data_dir, *args: str) -> subprocess.CompletedProcess:
    env = svc_env(DATABASE_URL=database_url, SVC_DATA_DIR=str(data_dir))
    return subprocess.run([SVC, "demo", *args], env=env, capture_output=True, text=True, timeout=300, check=False)


def test_demo_refuses_a_database_with_tickets_and_force_replaces_them(api, database_url, tmp_path):
    api.post("/api/v1/initiatives", json={"id": "ours", "name": "Ours", "stage": "active"})
    api.post("/api/v1/tickets", json={"key": "OURS-1", "initiative_id": "ours", "title": "Real work"})

    refused = demo(database_url, tmp_path)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "already holds 1 ticket" in refused.stderr and "--force" in refused.stderr
    assert [t["key"] for t in api.get("/api/v1/tickets").json["tickets"]] == ["OURS-1"]

    forced = demo(database_url, tmp_path, "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "18 tickets in 5 initiatives" in forced.stdout
    # What to run next: the whole service (`svc serve` alone has no jobs process, so bay releases never finish);
    # the demo's policy, which its router judged under, is the one in force, so the decisions page's scorecard and
    # backtest mean something.
    assert "now `svc run`" in forced.stdout and "`svc serve`" not in forced.stdout
    assert "whose allowlist is github:github-actions," in forced.stdout
    in_force = api.get("/api/v1/router/policy").json
    assert "github:github-actions" in in_force["policy"]["allowlist"] and in_force["set_by"] == "svc demo"
    keys = {t["key"] for t in api.get("/api/v1/tickets?limit=500").json["tickets"]}
    assert "OURS-1" not in keys and {"PORT-12", "WRITING-DAILY"} <= keys
    # Under the policy it left in force, a backtest flips nothing.
    env = svc_env(DATABASE_URL=database_url, SVC_DATA_DIR=str(tmp_path))
    today = subprocess.run(
        [SVC, "backtest", "--format", "json"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert today.returncode == 0, today.stderr
    report = json.loads(today.stdout)
    # About 130 decisions, some 50 of them the service's own events (the writing agent's and the router's), which a
    # backtest never judges.
    assert report["evaluated"] > 60 and report["flipped"] == 0, report["flips_by_gate"]
