"""The round trip of issue 29's "done when", with real processes: a worker driven by `svc worker` claims the job a
live rule queued, and its valid output becomes exactly one draft pull request at the forge; an invalid one writes
nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import requests
from dispatch_kit import WORKER_PASSWORD, policy

from conftest import BASIC, CI_SECRET
from processes import SVC, ServiceProcess, start_service, svc_env, wait_until
from router_kit import envelope
from servers.forges import GITHUB_TOKEN, FakeGitHub

pytestmark = pytest.mark.process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REPO = "acme/portfolio"


def test_svc_worker_claims_and_its_output_becomes_one_draft_pull_request(app, tmp_path, database_url):
    from domain import accounts

    accounts.add("bay-1", "worker", WORKER_PASSWORD)
    with FakeGitHub() as forge:
        forge.add_repo(REPO)
        env = {
            "SVC_CI_WEBHOOK_SECRET": CI_SECRET,
            "SVC_BASIC_AUTH": BASIC,
            "SVC_GITHUB_API_URL": forge.url,
            "SVC_GITHUB_TOKEN": GITHUB_TOKEN,
        }
        server, base = start_service(tmp_path, database_url, **env)
        jobs = ServiceProcess(
            ["jobs"], svc_env(SVC_DATA_DIR=str(tmp_path / "data"), DATABASE_URL=database_url, **env), tmp_path / "j.log"
        ).start()
        try:
            people = requests.Session()
            people.auth = tuple(BASIC.split(":", 1))
            people.post(f"{base}/api/v1/initiatives", json={"id": "portfolio", "name": "P", "stage": "active"})
            ticket = {"key": "PORT-7", "initiative_id": "portfolio", "title": "Fix the login", "stage": "ci"}
            assert people.post(f"{base}/api/v1/tickets", json=ticket).status_code == 201
            current = people.get(f"{base}/api/v1/router/policy")
            changed = people.put(
                f"{base}/api/v1/router/policy",
                json={"policy": policy(live=("fixer",)), "reason": "go live", "force": "an end-to-end test"},
                headers={"If-Match": current.headers["ETag"]},
            )
            assert changed.status_code == 200, changed.text
            event = envelope("pipeline_failed", "PORT-7")
            event["subject"]["repo"] = REPO
            routed = requests.post(
                f"{base}/api/v1/events", json=event, headers={"X-Svc-CI-Secret": CI_SECRET}, timeout=30
            )
            job_id = routed.json()["decision"]["job_id"]
            worker_env = svc_env(SVC_BASE_URL=base, SVC_WORKER_AUTH=f"bay-1:{WORKER_PASSWORD}")
            ran = subprocess.run(
                [
                    SVC,
                    "worker",
                    "--bay",
                    "bay-1",
                    "--once",
                    "--",
                    sys.executable,
                    str(EXAMPLES / "worker/toy_worker.py"),
                ],
                env=worker_env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert ran.returncode == 0, ran.stderr
            wait_until(
                lambda: people.get(f"{base}/api/v1/dispatch/jobs/{job_id}").json()["forge"]["pull_request"],
                timeout=60,
                interval=0.2,
                what="the jobs process to open the draft pull request",
            )
            job = people.get(f"{base}/api/v1/dispatch/jobs/{job_id}").json()
            ticket = people.get(f"{base}/api/v1/tickets/PORT-7").json()
        finally:
            jobs.stop()
            server.stop()
        (pull,) = forge.pull_requests(REPO)
        assert (pull["draft"], pull["head"]["ref"], pull["title"]) == (True, "svc/port-7", "PORT-7: Fix the login")
        assert (job["state"], job["forge"]["pull_request"]) == ("succeeded", pull["html_url"])
        assert (ticket["link"], ticket["stage"], ticket["waiting_on"]) == (pull["html_url"], "ci", "ci")


BAD_COMMAND = (
    "import json, sys; job = json.load(sys.stdin); print(json.dumps({'schema': 'svc.worker-output/v0', "
    "'ticket': job['ticket']['key'], 'role': job['role'], 'status': 'changes_ready', 'summary': 'pushed to main', "
    "'branch': 'main', 'commits': [{'sha': 'a' * 40, 'message': 'm'}], 'files_changed': ['../../etc/passwd']}))"
)


def test_an_invalid_output_from_svc_worker_writes_nothing(app, tmp_path, database_url):
    from domain import accounts

    accounts.add("bay-1", "worker", WORKER_PASSWORD)
    with FakeGitHub() as forge:
        forge.add_repo(REPO)
        env = {
            "SVC_CI_WEBHOOK_SECRET": CI_SECRET,
            "SVC_BASIC_AUTH": BASIC,
            "SVC_GITHUB_API_URL": forge.url,
            "SVC_GITHUB_TOKEN": GITHUB_TOKEN,
        }
        server, base = start_service(tmp_path, database_url, **env)
        jobs = ServiceProcess(
            ["jobs"], svc_env(SVC_DATA_DIR=str(tmp_path / "data"), DATABASE_URL=database_url, **env), tmp_path / "j.log"
        ).start()
        try:
            people = requests.Session()
            people.auth = tuple(BASIC.split(":", 1))
            people.post(f"{base}/api/v1/initiatives", json={"id": "portfolio", "name": "P", "stage": "active"})
            ticket = {"key": "PORT-7", "initiative_id": "portfolio", "title": "Fix the login", "stage": "ci"}
            people.post(f"{base}/api/v1/tickets", json=ticket)
            current = people.get(f"{base}/api/v1/router/policy")
            people.put(
                f"{base}/api/v1/router/policy",
                json={"policy": policy(live=("fixer",)), "reason": "go live", "force": "an end-to-end test"},
                headers={"If-Match": current.headers["ETag"]},
            )
            event = envelope("pipeline_failed", "PORT-7")
            event["subject"]["repo"] = REPO
            routed = requests.post(
                f"{base}/api/v1/events", json=event, headers={"X-Svc-CI-Secret": CI_SECRET}, timeout=30
            )
            job_id = routed.json()["decision"]["job_id"]
            ran = subprocess.run(
                [SVC, "worker", "--bay", "bay-1", "--once", "--", sys.executable, "-c", BAD_COMMAND],
                env=svc_env(SVC_BASE_URL=base, SVC_WORKER_AUTH=f"bay-1:{WORKER_PASSWORD}"),
                capture_output=True,
                text=True,
                timeout=120,
            )
            job = people.get(f"{base}/api/v1/dispatch/jobs/{job_id}").json()
            ticket = people.get(f"{base}/api/v1/tickets/PORT-7").json()
        finally:
            jobs.stop()
            server.stop()
        assert ran.returncode == 1, ran.stderr
        assert job["state"] == "failed" and "/branch" in job["reason"]
        assert (ticket["waiting_on"], ticket["link"]) == ("agent_failed", None)
        assert forge.calls == []
