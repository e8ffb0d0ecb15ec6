"""The router as it runs: `svc serve` takes signed webhooks, `svc jobs` routes the board's own events."""

import pytest
import requests

from events_kit import GITHUB_SECRET, github_headers, raw_example
from processes import ServiceProcess, free_port, svc_env, wait_until

pytestmark = pytest.mark.process

CI_SECRET = "e2e-ci-secret-0123456789abcdef"
BASIC = ("admin", "correct-horse-battery")


def test_webhooks_are_recorded_by_the_server_and_board_events_by_the_jobs_process(tmp_path, database_url):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = svc_env(
        SVC_DATA_DIR=str(tmp_path),
        SVC_PORT=str(port),
        DATABASE_URL=database_url,
        SVC_CI_WEBHOOK_SECRET=CI_SECRET,
        SVC_BASIC_AUTH=":".join(BASIC),
        SVC_GITHUB_WEBHOOK_SECRET=GITHUB_SECRET,
        SVC_ROUTER_ALLOWLIST="svc:admin,github:svc-coder[bot]",
    )
    server = ServiceProcess(["serve"], env, tmp_path / "serve.log").start()
    worker = None
    try:
        server.wait_healthy(base)
        session = requests.Session()
        session.auth = BASIC
        assert session.post(base + "/api/v1/initiatives", json={"id": "portfolio", "name": "P"}, timeout=5).ok
        session.patch(base + "/api/v1/initiatives/portfolio", json={"stage": "active"}, timeout=5)
        created = session.post(
            base + "/api/v1/tickets",
            json={"key": "PORT-12", "initiative_id": "portfolio", "title": "Login", "stage": "queued"},
            timeout=5,
        )
        assert created.status_code == 201
        assert session.post(base + "/api/v1/tickets/PORT-12/move", json={"to": "execute"}, timeout=5).ok

        body = raw_example("payloads/github/pull_request.synchronize.json")
        headers = github_headers("pull_request", "e2e-delivery-1", body)
        first = requests.post(base + "/api/v1/webhooks/forge", data=body, headers=headers, timeout=5)
        again = requests.post(base + "/api/v1/webhooks/forge", data=body, headers=headers, timeout=5)
        assert (first.status_code, again.status_code) == (202, 200)
        forged = requests.post(base + "/api/v1/webhooks/forge", data=body + b" ", headers=headers, timeout=5)
        assert forged.status_code == 401

        def svc_decisions():
            return session.get(base + "/api/v1/router/decisions?source=svc", timeout=5).json()["decisions"]

        assert svc_decisions() == []  # the board's events wait in the outbox for the jobs process
        # The ops agents are left to an external cron: nothing scheduled runs here, whatever the time of day.
        worker = ServiceProcess(["jobs"], {**env, "SVC_OPS_SCHEDULER": "external"}, tmp_path / "jobs.log").start()
        routed = wait_until(lambda: len(svc_decisions()) == 2 and svc_decisions(), what="the board's events routed")
        assert [(d["kind"], d["outcome"], d["role"]) for d in routed] == [
            ("state_changed", "would_dispatch", "coder"),  # queued -> execute by an allowlisted person
            ("state_changed", "no_action", None),  # created in queued
        ]
        everything = session.get(base + "/api/v1/router/decisions", timeout=5).json()["decisions"]
        assert len(everything) == 3
        assert all(d["dispatched"] is False for d in everything)
    finally:
        if worker is not None:
            worker.stop()
        server.stop()
