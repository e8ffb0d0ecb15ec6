"""No event lost at the border, with real processes: signed GitHub and GitLab deliveries arrive while the database
is away and get 503; the database comes back; `svc reconcile` asks the senders (local servers shaped like GitHub's
deliveries API and GitLab's hook events API), which deliver again as they would; every lost event is recorded
exactly once, and a second `svc reconcile` asks for nothing."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
import requests
from end_to_end.test_outage_processes import Outage, PipedProcess, _answers, _started

from events_kit import GITHUB_SECRET, GITLAB_TOKEN, example, github_headers, gitlab_headers
from processes import SVC, free_port, svc_env, wait_until
from servers.forges import GITHUB_TOKEN, FakeGitHub, FakeGitLab, http_receiver
from servers.forges import GITLAB_TOKEN as GITLAB_API_TOKEN

pytestmark = [pytest.mark.process, pytest.mark.both_backends]

SECRET = "reconcile-ci-secret-0123456789abcdef"
BASIC = ("ops", "reconcile-basic-password-0123")
HOOK = "repos/acme/portfolio/hooks/467123908"
LAB_HOOK = "projects/15/hooks/7"


def _pull_request(number: int) -> tuple[dict[str, str], bytes]:
    payload = example("payloads/github/pull_request.opened.json")
    payload["pull_request"]["number"] = number
    body = json.dumps(payload).encode()
    return github_headers("pull_request", str(uuid.uuid4()), body), body


def _merge_request(iid: int) -> tuple[dict[str, str], bytes]:
    payload = example("payloads/gitlab/merge_request.open.json")
    payload["object_attributes"]["iid"] = iid
    headers = gitlab_headers("Merge Request Hook", str(uuid.uuid4()), idempotency_key=str(uuid.uuid4()))
    return headers, json.dumps(payload).encode()


def test_deliveries_refused_during_an_outage_are_recovered_once_by_svc_reconcile(tmp_path, database_url):
    outage = Outage(database_url)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    receiver = http_receiver(base + "/api/v1/webhooks/forge")
    with FakeGitHub(receiver) as github, FakeGitLab(receiver) as gitlab:
        env = svc_env(
            SVC_DATA_DIR=str(tmp_path / "data"),
            SVC_PORT=str(port),
            DATABASE_URL=outage.url,
            SVC_CI_WEBHOOK_SECRET=SECRET,
            SVC_BASIC_AUTH=":".join(BASIC),
            SVC_GITHUB_WEBHOOK_SECRET=GITHUB_SECRET,
            SVC_GITLAB_WEBHOOK_TOKEN=GITLAB_TOKEN,
            SVC_GITHUB_API_URL=github.url,
            SVC_GITHUB_TOKEN=GITHUB_TOKEN,
            SVC_GITHUB_HOOKS=HOOK,
            SVC_GITLAB_API_URL=gitlab.url,
            SVC_GITLAB_TOKEN=GITLAB_API_TOKEN,
            SVC_GITLAB_HOOKS=LAB_HOOK,
        )
        server = PipedProcess(["serve"], env)
        try:
            _started(server, lambda: _answers(base + "/healthz"), "the server")
            outage.pids = [server.proc.pid]
            assert github.send(HOOK, "pull_request", "opened", *_pull_request(1)) == 202
            assert gitlab.send(LAB_HOOK, "merge_request_hooks", *_merge_request(1)) == 202

            outage.begin()
            assert [github.send(HOOK, "pull_request", "opened", *_pull_request(n)) for n in (2, 3)] == [503, 503]
            assert [gitlab.send(LAB_HOOK, "merge_request_hooks", *_merge_request(n)) for n in (2, 3)] == [503, 503]
            outage.end()
            wait_until(lambda: requests.get(base + "/healthz", timeout=5).ok, timeout=30, what="the database back")
            assert len(_decisions(base)) == 2

            first = subprocess.run([SVC, "reconcile"], env=env, capture_output=True, text=True, timeout=120)
            assert first.returncode == 0, first.stdout + first.stderr
            assert "asked again for 4" in first.stdout

            decisions = _decisions(base)
            assert len(decisions) == 6
            assert len({d["event_id"] for d in decisions}) == 6
            gaps = requests.get(base + "/api/v1/router/reconciliation", auth=BASIC, timeout=10).json()["gaps"]
            assert sorted((g["sender"], g["state"], g["attempts"]) for g in gaps) == [
                ("github", "recovered", 1),
                ("github", "recovered", 1),
                ("gitlab", "recovered", 1),
                ("gitlab", "recovered", 1),
            ]
            asked = (len(github.asked_again()), len(gitlab.asked_again()))
            assert asked == (2, 2)

            second = subprocess.run([SVC, "reconcile"], env=env, capture_output=True, text=True, timeout=120)
            assert second.returncode == 0, second.stdout + second.stderr
            assert "asked again for 0" in second.stdout
            assert (len(github.asked_again()), len(gitlab.asked_again())) == asked
            assert len(_decisions(base)) == 6
            runs = requests.get(base + "/api/v1/agents/runs?agent_id=reconciler", auth=BASIC, timeout=10).json()
            assert [r["ok"] for r in runs["runs"]] == [True, True]
            strip = requests.get(base + "/api/v1/agents", auth=BASIC, timeout=10).json()["agents"]
            (tile,) = [a for a in strip if a["agent_id"] == "reconciler"]
            assert tile["ok"] is True

            # A sender that cannot be read fails the run: exit 1, its hook named, the tile red.
            github.forbidden.add(HOOK)
            third = subprocess.run([SVC, "reconcile"], env=env, capture_output=True, text=True, timeout=120)
            assert third.returncode == 1 and HOOK in third.stdout and "403" in third.stdout
            assert GITHUB_TOKEN not in third.stdout + third.stderr
            strip = requests.get(base + "/api/v1/agents", auth=BASIC, timeout=10).json()["agents"]
            (tile,) = [a for a in strip if a["agent_id"] == "reconciler"]
            assert tile["ok"] is False
        finally:
            outage.end()
            server.stop()
            outage.close()


def _decisions(base: str) -> list[dict]:
    return requests.get(base + "/api/v1/router/decisions?limit=500", auth=BASIC, timeout=10).json()["decisions"]
