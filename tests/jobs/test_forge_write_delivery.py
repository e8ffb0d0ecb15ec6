"""The forge writes of a job, delivered from the outbox against local servers shaped like GitHub's and GitLab's REST
APIs: a valid output becomes exactly one draft pull request (and its comment), the ticket's link and a move to `ci`;
an invalid output writes nothing; a forge failing for a while gets its pull request once, afterwards, the first two
retries within 30 s; without a token or a repository nothing is written and the job says why."""

from __future__ import annotations

from datetime import timedelta

import pytest
from dispatch_kit import claim, output, policy, set_policy, worker

from jobs import assembly
from jobs.delivery import OutboxDeliverer
from storage.db import connection
from storage.models import OutboxMessage

from events_kit import ALLOWLIST, seed_board
from router_kit import envelope, route
from servers.forges import GITHUB_TOKEN, GITLAB_TOKEN, FakeGitHub, FakeGitLab
from testclient import ApiClient

REPO = "acme/portfolio"
PROJECT = "acme/web/portfolio"


@pytest.fixture
def github():
    with FakeGitHub() as fake:
        fake.add_repo(REPO, default_branch="trunk")
        yield fake


@pytest.fixture
def gitlab():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT, project_id=15)
        yield fake


def setup(app_factory, config_factory, **forges):
    """An app whose fixer rule is live, a ticket in ci, and the config the jobs process runs with."""
    from conftest import BASIC, CI_SECRET

    config = config_factory(router_allowlist=ALLOWLIST, **forges)
    api = ApiClient(app_factory(config), basic=BASIC, ci_secret=CI_SECRET)
    seed_board(api, tickets={"PORT-7": "ci"})
    set_policy(api, policy(live=("fixer",)))
    return api, config


def fixer_job(api, *, repo: str | None = REPO, gitlab: bool = False) -> dict:
    """A failed pipeline of `repo` about PORT-7 dispatches a fixer; a worker claims it. The claimed job."""
    event = envelope("pipeline_failed", "PORT-7")
    if repo is not None:
        event["subject"]["repo"] = repo
    if gitlab:
        event["id"] = "gitlab:8d1f2c3a-pipeline"
        event["actor"] = {"kind": "system", "id": "gitlab:gitlab-ci", "roles": []}
    decision = route(api, event)
    assert decision["dispatched"] is True, decision
    answer = claim(worker(api))
    assert answer.status_code == 200, answer.text
    return answer.json["job"]


def hand_back(api, job: dict, document: dict):
    bay = ApiClient(api.client.app, basic="bay-1:worker-password-1", ci_secret="")
    return bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=document)


def deliver(config, clock) -> int:
    """One drain of the forge writes by a jobs process built afresh (as after a restart)."""
    handlers, recorders = assembly.outbox_handlers(config, clock)
    return OutboxDeliverer(handlers, clock, recorders=recorders).drain(kinds=["forge_write"])


def messages() -> list[OutboxMessage]:
    with connection():
        return list(OutboxMessage.select().where(OutboxMessage.kind == "forge_write"))


def test_a_valid_output_becomes_exactly_one_draft_pull_request_its_comment_the_link_and_a_move_to_ci(
    app_factory, config_factory, clock, github
):
    api, config = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    job = fixer_job(api)
    assert hand_back(api, job, output(job)).status_code == 200
    assert deliver(config, clock) == 1
    (pull,) = github.pull_requests(REPO)
    assert (pull["title"], pull["draft"], pull["head"]["ref"], pull["base"]["ref"]) == (
        "PORT-7: the change",
        True,
        "svc/port-7/work",
        "trunk",
    )
    assert pull["body"].startswith("What it does and why.\n\n---\nOpened by svc for PORT-7, job 1")
    (comment,) = github.comments
    assert comment["body"] == "The change is ready for review."
    written = api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["forge"]
    assert written == {
        "state": "written",
        "pull_request": pull["html_url"],
        "comment": comment["html_url"],
        "error": None,
    }
    ticket = api.get("/api/v1/tickets/PORT-7").json
    assert (ticket["link"], ticket["stage"], ticket["waiting_on"]) == (pull["html_url"], "ci", "ci")
    assert ticket["timeline"][0]["kind"] == "pull_request" and pull["html_url"] in ticket["timeline"][0]["summary"]
    assert [m.status for m in messages()] == ["sent"]
    assert deliver(config, clock) == 0 and len(github.written()) == 2  # the pull request and its comment, once


def test_an_invalid_output_writes_nothing_to_the_forge(app_factory, config_factory, clock, github):
    api, config = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    job = fixer_job(api)
    refused = hand_back(api, job, output(job, branch="main"))
    assert refused.status_code == 422
    assert deliver(config, clock) == 0
    assert messages() == [] and github.calls == []


@pytest.mark.both_backends
def test_a_forge_failing_for_a_while_gets_its_pull_request_once_afterwards(app_factory, config_factory, clock, github):
    api, config = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    job = fixer_job(api)
    hand_back(api, job, output(job))
    github.fail(500, times=2, method="POST", path="/pulls")
    github.fail(503, times=1, method="GET", path="/repos/")
    queued_at = clock()
    tries = []
    for _ in range(10):
        deliver(config, clock)
        (message,) = messages()
        tries.append(message.next_attempt_at)
        if message.status == "sent":
            break
        clock.move_to(message.next_attempt_at)
    assert message.status == "sent" and len(github.pull_requests(REPO)) == 1
    assert len(tries) == 4  # three failed attempts (a 503, then two 500s), then the one that wrote it
    assert tries[1] - queued_at <= timedelta(seconds=30)  # the first two retries within 30 s
    assert api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["forge"]["error"] is None


@pytest.mark.both_backends
def test_a_pull_request_recorded_before_a_failed_comment_is_not_opened_again(
    app_factory, config_factory, clock, github
):
    api, config = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    job = fixer_job(api)
    hand_back(api, job, output(job))
    github.fail(502, times=1, method="POST", path="/comments")
    deliver(config, clock)
    assert api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["forge"]["pull_request"] is not None
    github.close_pull(REPO, 1)  # someone closed it meanwhile: still, the job's pull request is that one
    clock.move_to(messages()[0].next_attempt_at)
    deliver(config, clock)
    assert len(github.pull_requests(REPO)) == 1 and len(github.comments) == 1
    assert messages()[0].status == "sent"


def test_a_refusal_is_given_up_and_the_job_says_why(app_factory, config_factory, clock, github):
    api, config = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    job = fixer_job(api)
    hand_back(api, job, output(job))
    github.fail(403, times=5)
    deliver(config, clock)
    assert [m.status for m in messages()] == ["failed"]
    found = api.get(f"/api/v1/dispatch/jobs/{job['id']}").json
    error = found["forge"]["error"]
    assert "403" in error or "not accessible" in error
    assert GITHUB_TOKEN not in error and github.pull_requests(REPO) == []
    # Loud: the job stays succeeded (its output was accepted), its write failed, the ticket needs someone.
    assert (found["state"], found["forge"]["state"], found["failure"]["kind"]) == ("succeeded", "failed", "forge")
    ticket = api.get("/api/v1/tickets/PORT-7").json
    assert (ticket["stage"], ticket["waiting_on"], ticket["needs_you"]) == ("execute", "forge_failed", True)


@pytest.mark.parametrize("missing", ["token", "repo"])
def test_without_a_token_or_a_repository_nothing_is_written_and_the_job_says_why(
    app_factory, config_factory, clock, github, missing
):
    token = None if missing == "token" else GITHUB_TOKEN
    api, config = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=token)
    job = fixer_job(api, repo=None if missing == "repo" else REPO)
    hand_back(api, job, output(job))
    deliver(config, clock)
    assert [m.status for m in messages()] == ["skipped"]
    error = api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["forge"]["error"]
    assert ("SVC_GITHUB_TOKEN" if missing == "token" else "subject.repo") in error
    assert github.calls == []
    assert api.get("/api/v1/tickets/PORT-7").json["link"] is None


def test_an_event_from_gitlab_gets_a_draft_merge_request_and_its_note(app_factory, config_factory, clock, gitlab):
    api, config = setup(app_factory, config_factory, gitlab_api_url=gitlab.url, gitlab_api_token=GITLAB_TOKEN)
    job = fixer_job(api, repo=PROJECT, gitlab=True)
    hand_back(api, job, output(job))
    deliver(config, clock)
    (mr,) = gitlab.merge_requests(PROJECT)
    assert mr["title"].startswith("Draft:") and mr["source_branch"] == "svc/port-7/work"
    (note,) = gitlab.notes
    forge = api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["forge"]
    assert forge["pull_request"] == mr["web_url"] and forge["comment"].startswith(mr["web_url"])
    assert api.get("/api/v1/tickets/PORT-7").json["link"] == mr["web_url"]
    assert note["body"] == "The change is ready for review."


def test_githubs_secondary_rate_limit_keeps_the_write_waiting_at_least_a_minute_then_writes_it(
    app_factory, config_factory, clock, github
):
    """CONTRACT.md, "Speaking the forges' dialects": a secondary rate limit is not refused credentials."""
    api, config = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    job = fixer_job(api)
    hand_back(api, job, output(job))
    github.secondary_rate_limit(method="POST", path="/pulls")
    before = clock()
    deliver(config, clock)
    (message,) = messages()
    assert message.status == "pending" and message.next_attempt_at - before >= timedelta(seconds=60)
    assert api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["forge"]["error"] is None
    clock.move_to(message.next_attempt_at)
    deliver(config, clock)
    assert [m.status for m in messages()] == ["sent"] and len(github.pull_requests(REPO)) == 1
