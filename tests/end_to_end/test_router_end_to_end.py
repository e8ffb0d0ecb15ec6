"""The router as it runs: `svc serve` takes signed webhooks, `svc jobs` routes the board's own events."""

from datetime import UTC, datetime

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


@pytest.mark.both_backends
def test_a_new_policy_reaches_the_server_and_the_jobs_process_without_a_restart(tmp_path, database_url):
    """Both processes route under the first policy, stored at the first start from the environment; a PUT makes
    another the one in force, and the next event each routes is decided under it. A restart whose environment
    disagrees with the policy says so in one line and changes nothing."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = svc_env(
        SVC_DATA_DIR=str(tmp_path),
        SVC_PORT=str(port),
        DATABASE_URL=database_url,
        SVC_CI_WEBHOOK_SECRET=CI_SECRET,
        SVC_BASIC_AUTH=":".join(BASIC),
        SVC_ROUTER_ALLOWLIST="svc:admin",
        SVC_OPS_SCHEDULER="external",
    )
    server = ServiceProcess(["serve"], env, tmp_path / "serve.log").start()
    worker = ServiceProcess(["jobs"], env, tmp_path / "jobs.log").start()
    again = None
    try:
        server.wait_healthy(base)
        session = requests.Session()
        session.auth = BASIC
        session.post(base + "/api/v1/initiatives", json={"id": "portfolio", "name": "P", "stage": "active"}, timeout=5)
        for key in ("PORT-1", "PORT-2"):
            made = session.post(
                base + "/api/v1/tickets",
                json={"key": key, "initiative_id": "portfolio", "title": key, "stage": "queued"},
                timeout=5,
            )
            assert made.status_code == 201

        def decision_about(key, source):
            found = session.get(base + f"/api/v1/router/decisions?subject_id={key}&source={source}", timeout=5).json()[
                "decisions"
            ]
            return found[0] if found and found[0]["kind"] == "state_changed" and found[0]["role"] else None

        def event(key):
            document = {
                "schema": "svc.normalized-event/v0",
                "id": f"tracker:{key}:to-execute",
                "occurred_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),  # fresh when judged
                "source": "tracker",
                "transition": {"kind": "state_changed", "from": "queued", "to": "execute"},
                "subject": {"type": "ticket", "id": key},
                "actor": {"kind": "human", "id": "svc:admin"},
                "dispatch_hints": {"eligible_for_worker": True},
            }
            answer = requests.post(
                base + "/api/v1/events", json=document, headers={"X-Svc-CI-Secret": CI_SECRET}, timeout=5
            )
            assert answer.status_code == 202, answer.text
            return answer.json()["decision"]

        first = session.get(base + "/api/v1/router/policy", timeout=5)
        assert first.json()["policy"]["allowlist"] == ["svc:admin"] and first.json()["set_by"] == "svc"
        # Under the first policy: the server routes an event, the jobs process a move on the board.
        assert event("PORT-1")["outcome"] == "would_dispatch"
        session.post(base + "/api/v1/tickets/PORT-1/move", json={"to": "execute"}, timeout=5)
        moved = wait_until(lambda: decision_about("PORT-1", "svc"), what="the jobs process routing the move")
        assert (moved["outcome"], moved["policy"]["version"]) == ("would_dispatch", first.json()["version"]), moved

        # A new policy: the admin is off the allowlist.
        changed = session.put(
            base + "/api/v1/router/policy",
            json={"policy": {**first.json()["policy"], "allowlist": ["svc:someone-else"]}, "reason": "e2e"},
            headers={"If-Match": first.headers["ETag"]},
            timeout=5,
        )
        assert changed.status_code == 200, changed.text
        version = changed.json()["version"]
        decided = event("PORT-2")
        assert (decided["outcome"], decided["policy"]["version"]) == ("blocked", version)
        session.post(base + "/api/v1/tickets/PORT-2/move", json={"to": "execute"}, timeout=5)
        moved = wait_until(lambda: decision_about("PORT-2", "svc"), what="the jobs process routing the second move")
        assert (moved["outcome"], moved["policy"]["version"]) == ("blocked", version)

        # A restart of the jobs process with the old environment: one line says it disagrees; nothing changes.
        worker.stop()
        again = ServiceProcess(["jobs"], env, tmp_path / "jobs-again.log").start()
        said = wait_until(
            lambda: [line for line in again.output().splitlines() if "router policy:" in line],
            what="the jobs process saying the environment disagrees",
        )
        assert len(said) == 1 and "SVC_ROUTER_ALLOWLIST=svc:admin" in said[0] and version in said[0]
        assert session.get(base + "/api/v1/router/policy", timeout=5).json()["version"] == version
        assert "router policy:" not in worker.output()  # the first start stored the policy, and said nothing
    finally:
        for process in (again, worker, server):
            if process is not None:
                process.stop()
