"""The round trip of issue 29's "done when", with real processes: a worker driven by `svc worker` claims the job a
live rule queued, and its valid output becomes exactly one draft pull request at the forge; an invalid one writes
nothing. And the loop of issue 36's: from a queued ticket, through its pull request, its pipeline, a person's gate
and the merge, to done, its bay free for the next ticket's job."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
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
            event["occurred_at"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # the fresh gate's
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
    assert job["state"] == "failed" and job["failure"]["kind"] == "output" and "/branch" in job["failure"]["detail"]
    assert (ticket["waiting_on"], ticket["link"]) == ("agent_failed", None)
    assert dispatched.forge.calls == []


def test_svc_worker_walks_a_ticket_from_queued_to_done_and_its_bay_takes_the_next_job(app, tmp_path, database_url):
    """docs/dispatch.md's walk through the loop, as a team lead does it: the coder's job, the draft pull request, the
    pipeline on its head, a person's gate, the merge, the base branch's pipeline at the merge commit: done, the bay
    freed, and the next ticket's job claimed in it."""
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
            api = f"{base}/api/v1"

            def ticket(key: str) -> dict:
                return people.get(f"{api}/tickets/{key}").json()

            def event(document: dict) -> dict:
                document["subject"]["repo"] = REPO
                document["occurred_at"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                answer = requests.post(
                    f"{api}/events", json=document, headers={"X-Svc-CI-Secret": CI_SECRET}, timeout=30
                )
                assert answer.status_code == 202, answer.text
                return answer.json()["decision"]

            def worker() -> subprocess.CompletedProcess:
                return subprocess.run(
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
                    env=svc_env(SVC_BASE_URL=base, SVC_WORKER_AUTH=f"bay-1:{WORKER_PASSWORD}"),
                    capture_output=True,
                    text=True,
                    timeout=120,
                )

            people.post(f"{api}/initiatives", json={"id": "portfolio", "name": "P", "stage": "active"})
            for key in ("PORT-7", "PORT-8"):
                body = {"key": key, "initiative_id": "portfolio", "title": f"Ticket {key}", "stage": "queued"}
                assert people.post(f"{api}/tickets", json=body).status_code == 201
            current = people.get(f"{api}/router/policy")
            changed = people.put(
                f"{api}/router/policy",
                json={"policy": policy(live=("coder", "fixer")), "reason": "go live", "force": "an end-to-end test"},
                headers={"If-Match": current.headers["ETag"]},
            )
            assert changed.status_code == 200, changed.text

            first = event(envelope("state_changed", "PORT-7", actor="github:mona"))
            assert first["dispatched"] is True, first
            assert worker().returncode == 0

            def read_job(number: int) -> dict:
                return people.get(f"{api}/dispatch/jobs/{number}").json()

            wait_until(
                lambda: read_job(first["job_id"])["forge"]["state"] == "written",
                timeout=60,
                what="the draft pull request",
            )
            job = read_job(first["job_id"])
            head = job["result"]["commits"][-1]["sha"]
            (pull,) = forge.pull_requests(REPO)
            assert (ticket("PORT-7")["stage"], ticket("PORT-7")["link"]) == ("ci", pull["html_url"])

            # The next ticket's job waits: the bay holds PORT-7's pull request until it is done.
            second = event(envelope("state_changed", "PORT-8", actor="github:mona"))
            assert second["dispatched"] is True, second
            held = worker()
            assert held.returncode == 3 and "bay-held" in held.stderr

            green = envelope("pipeline_passed", "PORT-7", actor="github:github-actions")
            green["forge"].update(head_sha=head, branch="svc/port-7")
            event(green)
            assert (ticket("PORT-7")["stage"], ticket("PORT-7")["needs_you"]) == ("human_test", True)
            assert people.post(f"{api}/tickets/PORT-7/move", json={"to": "human_merge"}).status_code == 200
            merged = envelope("opened", "PORT-7", actor="github:mona")
            merged["actor"]["kind"] = "human"
            merged["transition"] = {"kind": "merged", "from": "open", "to": "merged"}
            merged["forge"] = {"pr_number": pull["number"], "branch": "svc/port-7", "head_sha": head}
            merged["forge"]["merge_commit_sha"] = "e" * 40
            event(merged)
            assert ticket("PORT-7")["stage"] == "ship"
            main = envelope("pipeline_passed", "PORT-7", actor="github:github-actions")
            main["forge"].update(head_sha="e" * 40, branch="main", pr_number=None)
            event(main)
            assert ticket("PORT-7")["stage"] == "done"
            wait_until(
                lambda: ticket("PORT-7")["assigned_slot"] is None,
                timeout=60,
                interval=0.2,
                what="the jobs process to release PORT-7's bay",
            )
            assert worker().returncode == 0  # the bay takes PORT-8's job now
            assert read_job(second["job_id"])["state"] == "succeeded"
        finally:
            jobs.stop()
            server.stop()
