"""The round trip of issue 29's "done when", with real processes: a worker driven by `svc worker` claims the job a
live rule queued, and its valid output becomes exactly one draft pull request at the forge; an invalid one writes
nothing."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from dispatch_kit import WORKER_PASSWORD, policy

from conftest import BASIC, CI_SECRET, PASSWORDS
from processes import SVC, ServiceProcess, start_service, svc_env, wait_until
from router_kit import envelope
from servers.forges import GITHUB_TOKEN, FakeGitHub

pytestmark = pytest.mark.process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REPO = "acme/portfolio"
BAD_COMMAND = (
    "import json, sys; job = json.load(sys.stdin); print(json.dumps({'schema': 'svc.worker-output/v0', "
    "'ticket': job['ticket']['key'], 'role': job['role'], 'status': 'changes_ready', 'summary': 'pushed to main', "
    "'branch': 'main', 'commits': [{'sha': 'a' * 40, 'message': 'm'}], 'files_changed': ['../../etc/passwd']}))"
)


@dataclass
class Dispatched:
    base: str
    people: requests.Session
    forge: FakeGitHub
    job_id: int

    def worker(self, *command: str) -> subprocess.CompletedProcess:
        """`svc worker --bay bay-1 --once -- COMMAND`, as a team runs it."""
        return subprocess.run(
            [SVC, "worker", "--bay", "bay-1", "--once", "--", *command],
            env=svc_env(SVC_BASE_URL=self.base, SVC_WORKER_AUTH=f"bay-1:{WORKER_PASSWORD}"),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def read(self, path: str) -> dict:
        return self.people.get(f"{self.base}/api/v1/{path}").json()


@pytest.fixture
def dispatched(app, tmp_path, database_url):
    """`svc serve` and `svc jobs` with a fake GitHub holding the repository, a worker account, a live fixer rule and
    one job it queued for PORT-7 (in `ci`, its pipeline failed)."""
    from domain import accounts

    accounts.add("bay-1", "worker", WORKER_PASSWORD, passwords=PASSWORDS)
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
            assert routed.json()["decision"]["dispatched"] is True, routed.text
            yield Dispatched(base, people, forge, routed.json()["decision"]["job_id"])
        finally:
            jobs.stop()
            server.stop()


def test_svc_worker_claims_and_its_output_becomes_one_draft_pull_request(dispatched):
    ran = dispatched.worker(sys.executable, str(EXAMPLES / "worker/toy_worker.py"))
    assert ran.returncode == 0, ran.stderr
    assert WORKER_PASSWORD not in ran.stderr
    wait_until(
        lambda: dispatched.read(f"dispatch/jobs/{dispatched.job_id}")["forge"]["pull_request"],
        timeout=60,
        interval=0.2,
        what="the jobs process to open the draft pull request",
    )
    job = dispatched.read(f"dispatch/jobs/{dispatched.job_id}")
    ticket = dispatched.read("tickets/PORT-7")
    (pull,) = dispatched.forge.pull_requests(REPO)
    assert (pull["draft"], pull["head"]["ref"], pull["title"]) == (True, "svc/port-7", "PORT-7: Fix the login")
    assert (job["state"], job["forge"]["pull_request"]) == ("succeeded", pull["html_url"])
    assert (ticket["link"], ticket["stage"], ticket["waiting_on"]) == (pull["html_url"], "ci", "ci")
    # Nothing more is queued: the worker finds nothing to claim, and the forge still holds one pull request.
    again = dispatched.worker(sys.executable, str(EXAMPLES / "worker/toy_worker.py"))
    assert again.returncode == 3, again.stderr
    assert len(dispatched.forge.pull_requests(REPO)) == 1


def test_an_invalid_output_from_svc_worker_writes_nothing(dispatched):
    ran = dispatched.worker(sys.executable, "-c", BAD_COMMAND)
    job = dispatched.read(f"dispatch/jobs/{dispatched.job_id}")
    ticket = dispatched.read("tickets/PORT-7")
    assert ran.returncode == 1, ran.stderr
    assert job["state"] == "failed" and "/branch" in job["reason"]
    assert (ticket["waiting_on"], ticket["link"]) == ("agent_failed", None)
    assert dispatched.forge.calls == []
