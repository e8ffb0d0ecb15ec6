"""A ticket follows its pull request through the senders' own deliveries (`examples/payloads/`, signed as GitHub and
GitLab sign them): opened, a push, the pipeline on its head, a person's gate, the merge, the base branch's pipeline at
the merge commit, done; closed without merge, blocked. The rules stay in shadow mode: the loop moves tickets anyway.
On SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest

from events_kit import (
    ALLOWLIST,
    GITHUB_SECRET,
    GITLAB_TOKEN,
    github_headers,
    gitlab_headers,
    raw_example,
    seed_board,
)
from testclient import ApiClient

pytestmark = pytest.mark.both_backends

CI_SECRET = "test-ci-secret-0123456789abcdef"
MERGE_COMMIT = "e5bd3914e2e596debea16f433f57875b5b90bcd6"  # the merge commit both forges' merge examples name


@pytest.fixture
def api(app_factory, config_factory):
    config = config_factory(
        router_allowlist=ALLOWLIST, github_webhook_secret=GITHUB_SECRET, gitlab_webhook_token=GITLAB_TOKEN
    )
    api = ApiClient(app_factory(config), basic="admin:correct-horse-battery", ci_secret=CI_SECRET)
    seed_board(api, tickets={"PORT-12": "execute"})
    return api


def ticket(api) -> tuple[str, str | None, bool]:
    found = api.get("/api/v1/tickets/PORT-12").json
    return found["stage"], found["waiting_on"], found["needs_you"]


def github(api, name: str, event: str = "pull_request") -> dict:
    body = raw_example(f"payloads/github/{name}.json")
    answer = api.post(
        "/api/v1/webhooks/forge", body=body, headers=github_headers(event, f"delivery-{name}", body), auth=None
    )
    assert answer.status_code == 202, answer.text
    return answer.json["decision"]


def gitlab(api, name: str, event: str) -> dict:
    body = raw_example(f"payloads/gitlab/{name}.json")
    headers = gitlab_headers(event, f"uuid-{name}", idempotency_key=f"key-{name}")
    answer = api.post("/api/v1/webhooks/forge", body=body, headers=headers, auth=None)
    assert answer.status_code == 202, answer.text
    return answer.json["decision"]


def test_a_github_pull_request_and_its_workflows_take_the_ticket_to_done(api):
    opened = github(api, "pull_request.opened")
    assert opened["envelope"]["forge"]["head_sha"] == "6dcb09b5b57875f334f61aebed695e2e4193db5e"
    assert ticket(api) == ("ci", "ci", False)
    assert api.get("/api/v1/tickets/PORT-12").json["link"].endswith("/acme/portfolio/pull/42")
    github(api, "pull_request.synchronize")  # a new head, 1a2b...
    github(api, "workflow_run.completed-success", "workflow_run")  # green on that head
    assert ticket(api) == ("human_test", None, True)
    assert api.post("/api/v1/tickets/PORT-12/move", json={"to": "human_merge"}).status_code == 200
    merged = github(api, "pull_request.closed-merged")
    assert merged["envelope"]["forge"]["merge_commit_sha"] == MERGE_COMMIT
    assert ticket(api) == ("ship", None, False)
    main = github(api, "workflow_run.completed-success-main", "workflow_run")
    assert (main["envelope"]["forge"]["head_sha"], main["envelope"]["forge"]["branch"]) == (MERGE_COMMIT, "main")
    assert ticket(api) == ("done", None, False)


def test_a_github_pull_request_closed_without_merge_blocks_the_ticket(api):
    github(api, "pull_request.opened")
    github(api, "pull_request.closed-unmerged")
    assert ticket(api) == ("blocked", None, True)


def test_a_red_workflow_on_an_older_head_moves_nothing(api):
    github(api, "pull_request.opened")  # head 6dcb...
    github(api, "pull_request.synchronize")  # head 1a2b...: the latest
    document = json.loads(raw_example("payloads/github/workflow_run.completed-failure.json"))
    document["workflow_run"]["head_sha"] = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
    body = json.dumps(document).encode()
    headers = github_headers("workflow_run", "delivery-old-head", body)
    assert api.post("/api/v1/webhooks/forge", body=body, headers=headers, auth=None).status_code == 202
    assert ticket(api) == ("ci", "ci", False)
    github(api, "workflow_run.completed-failure", "workflow_run")  # the latest head is red
    assert ticket(api) == ("execute", "agent_failed", True)


def test_a_gitlab_merge_request_and_its_pipelines_take_the_ticket_to_done(api):
    opened = gitlab(api, "merge_request.open", "Merge Request Hook")
    assert opened["envelope"]["forge"]["head_sha"] == "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"  # last_commit.id
    assert ticket(api) == ("ci", "ci", False)
    gitlab(api, "pipeline.success", "Pipeline Hook")
    assert ticket(api) == ("human_test", None, True)
    assert api.post("/api/v1/tickets/PORT-12/move", json={"to": "human_merge"}).status_code == 200
    merged = gitlab(api, "merge_request.merge", "Merge Request Hook")
    assert merged["envelope"]["forge"]["merge_commit_sha"] == MERGE_COMMIT
    assert ticket(api) == ("ship", None, False)
    main = gitlab(api, "pipeline.success-main", "Pipeline Hook")
    assert (main["envelope"]["forge"]["head_sha"], main["envelope"]["forge"]["pr_number"]) == (MERGE_COMMIT, None)
    assert ticket(api) == ("done", None, False)


def test_a_gitlab_merge_request_closed_blocks_the_ticket(api):
    gitlab(api, "merge_request.open", "Merge Request Hook")
    gitlab(api, "merge_request.close", "Merge Request Hook")
    assert ticket(api) == ("blocked", None, True)
