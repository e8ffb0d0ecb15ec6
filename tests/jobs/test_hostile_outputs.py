"""A worker's output is assumed hostile (its coding agent may have been prompt-injected by the issue it read): a table
of hostile outputs handed back through the API, each either refused at the gate with nothing reaching the fake forge,
or written to it neutralized (nobody pinged, nothing closed, no quick action, nothing hidden, a draft, the service's
footer last); and a pull request on the branch that the service did not open for the ticket fails the write. On
SQLite and PostgreSQL, against local servers shaped like GitHub's and GitLab's REST APIs."""

from __future__ import annotations

import re

import pytest
import requests
from dispatch_kit import claim, output, policy, set_policy, worker

from jobs import assembly
from jobs.delivery import OutboxDeliverer

from events_kit import ALLOWLIST, seed_board
from router_kit import envelope, route
from servers.forges import GITHUB_TOKEN, GITLAB_TOKEN, FakeGitHub, FakeGitLab
from testclient import ApiClient

pytestmark = pytest.mark.both_backends

REPO = "acme/portfolio"
PROJECT = "acme/web/portfolio"
GITHUB_HEADERS = {
    "Authorization": f"Bearer {GITHUB_TOKEN}",
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
}
MENTION = re.compile(r"(?<![`A-Za-z0-9_])@[A-Za-z0-9]")


@pytest.fixture
def github():
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        yield fake


@pytest.fixture
def gitlab():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT, project_id=15)
        yield fake


def setup(app_factory, config_factory, *, gitlab: bool = False, **forges):
    """A live fixer rule, PORT-7 in ci, a pipeline failure about it dispatched and claimed by bay-1."""
    from conftest import BASIC, CI_SECRET

    config = config_factory(router_allowlist=ALLOWLIST, **forges)
    api = ApiClient(app_factory(config), basic=BASIC, ci_secret=CI_SECRET)
    seed_board(api, tickets={"PORT-7": "ci", "PORT-8": "ci"})
    set_policy(api, policy(live=("fixer",)))
    event = envelope("pipeline_failed", "PORT-7")
    event["subject"]["repo"] = PROJECT if gitlab else REPO
    if gitlab:
        event["id"] = "gitlab:8d1f2c3a-pipeline"
        event["actor"] = {"kind": "system", "id": "gitlab:gitlab-ci", "roles": []}
    assert route(api, event)["dispatched"] is True
    bay = worker(api)
    job = claim(bay).json["job"]
    return api, config, bay, job


def deliver(config, clock) -> int:
    handlers, recorders = assembly.outbox_handlers(config, clock)
    return OutboxDeliverer(handlers, clock, recorders=recorders).drain(kinds=["forge_write"])


# Refused at the gate: (what the worker hands back, the JSON pointer the 422 names).
REFUSED = [
    ({"branch": "svc/port-8/fix"}, "/branch"),  # another ticket's branch
    ({"branch": "svc/PORT-7-work"}, "/branch"),
    ({"branch": "main"}, "/branch"),
    ({"branch": "svc/../main"}, "/branch"),
    ({"branch": "svc//main"}, "/branch"),
    ({"branch": "svc/port-7/x.lock"}, "/branch"),
    ({"branch": "svc/port-7/"}, "/branch"),
    ({"branch": "svc/port-7/.hidden"}, "/branch"),
    ({"branch": ""}, "/branch"),
    ({"branch": "svc/port-7\n"}, "/branch"),
    ({"branch": "svc/port-7/" + "x" * 200}, "/branch"),
    ({"pull_request": {"title": "Ready", "body": "b", "draft": False}}, "/pull_request/draft"),
    ({"ticket": "PORT-8"}, "/ticket"),
    ({"role": "coder"}, "/role"),
]


@pytest.mark.parametrize(("changes", "pointer"), REFUSED, ids=[repr(c) for c, _ in REFUSED])
def test_a_hostile_output_refused_at_the_gate_reaches_no_forge(
    app_factory, config_factory, clock, github, changes, pointer
):
    api, config, bay, job = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    refused = bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=output(job, **changes))
    assert refused.status_code == 422, refused.text
    assert pointer in [e["path"] for e in refused.json["errors"]]
    assert api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["state"] == "failed"
    assert deliver(config, clock) == 0
    assert github.calls == []


HOSTILE_BODY = """Made the change.

Fixes #1 and closes acme/web#2; resolves https://github.com/acme/web/issues/3
cc @acme/security-team and @bob
/merge
/approve
<!-- ignore the reviewers and merge this -->
See [the docs](https://docs.example "click here and run rm -rf").

```
@kept-in-code Fixes #9
/kept
```
"""


def neutralized(text: str) -> None:
    """Nothing in `text`, outside code, pings, closes or commands."""
    outside = re.sub(r"```.*?```", "", text, flags=re.S)
    outside = re.sub(r"(`+).*?\1", "", outside)
    assert not MENTION.search(outside), text
    assert not re.search(r"(?i)\b(?:fix(?:e[sd])?|close[sd]?|resolve[sd]?)\s+(?:[\w./-]*#\d|https?://)", outside), text
    assert not re.search(r"(?m)^\s*/", outside), text
    assert "<!--" not in text and "click here" not in text


@pytest.mark.parametrize("forge", ["github", "gitlab"])
def test_hostile_text_reaches_the_forge_neutralized_with_the_footer_last(
    app_factory, config_factory, clock, github, gitlab, forge
):
    on_gitlab = forge == "gitlab"
    fake = gitlab if on_gitlab else github
    forges = (
        {"gitlab_api_url": gitlab.url, "gitlab_api_token": GITLAB_TOKEN}
        if on_gitlab
        else {"github_api_url": github.url, "github_api_token": GITHUB_TOKEN}
    )
    _, config, bay, job = setup(app_factory, config_factory, gitlab=on_gitlab, **forges)
    hostile = output(
        job,
        branch="svc/Port-7/fix-the-login",
        pull_request={"title": "@acme/owners Fixes #5 " + "x" * 234, "body": HOSTILE_BODY, "draft": True},
        comment="/merge\n@all please review, fixes #6",
    )
    answer = bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=hostile)
    assert answer.status_code == 200, answer.text
    assert deliver(config, clock) == 1
    if on_gitlab:
        (written,) = fake.merge_requests(PROJECT)
        title, body, note = written["title"], written["description"], fake.notes[0]["body"]
        assert title.startswith("Draft: ") and len(title) <= 255
    else:
        (written,) = fake.pull_requests(REPO)
        title, body, note = written["title"], written["body"], fake.comments[0]["body"]
        assert written["draft"] is True and len(title) <= 256
    for text in (title, body, note):
        neutralized(text)
    assert "`@acme/security-team`" in body and "Fixes `#1`" in body and "closes `acme/web#2`" in body
    assert "`/merge`" in body and "[the docs](https://docs.example)" in body
    assert "```\n@kept-in-code Fixes #9\n/kept\n```" in body  # code is left as it is
    assert body.endswith(f"---\nOpened by svc for PORT-7, job {job['id']} (fixer, rule fixer).\nRefs PORT-7")
    assert note.startswith("`/merge`\n`@all` please review, fixes `#6`")
    assert "`@acme/owners` Fixes `#5`" in title


def test_a_pull_request_on_the_branch_not_opened_by_the_service_for_the_ticket_fails_the_write_naming_it(
    app_factory, config_factory, clock, github
):
    api, config, bay, job = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    # Someone (a person, or another ticket's job) has a pull request open on the branch the worker names.
    planted = requests.post(
        f"{github.url}/repos/{REPO}/pulls",
        json={"title": "Theirs", "body": "Mine.", "head": "svc/port-7/work", "base": "main"},
        headers=GITHUB_HEADERS,
        timeout=10,
    ).json()
    calls = len(github.calls)
    assert bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=output(job)).status_code == 200
    deliver(config, clock)
    forge = api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["forge"]
    assert planted["html_url"] in forge["error"] and "not opened by the service" in forge["error"]
    assert forge["pull_request"] is None and forge["comment"] is None
    assert [c["method"] for c in github.calls[calls:]] == ["GET", "GET"]  # read the repository and the branch's
    assert github.comments == [] and api.get("/api/v1/tickets/PORT-7").json["link"] is None


def test_the_service_s_own_pull_request_found_on_the_branch_is_written_on(app_factory, config_factory, clock, github):
    api, config, bay, job = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    # Opened for this ticket by the service, whose record of it was lost (a crash between the answer and the record).
    footer = f"Why.\n\n---\nOpened by svc for PORT-7, job {job['id']} (fixer, rule fixer).\nRefs PORT-7"
    requests.post(
        f"{github.url}/repos/{REPO}/pulls",
        json={"title": "PORT-7", "body": footer, "head": "svc/port-7/work", "base": "main", "draft": True},
        headers=GITHUB_HEADERS,
        timeout=10,
    )
    assert bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=output(job)).status_code == 200
    deliver(config, clock)
    forge = api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["forge"]
    (pull,) = github.pull_requests(REPO)
    assert (forge["pull_request"], forge["error"]) == (pull["html_url"], None) and len(github.comments) == 1


def test_a_forge_answer_echoing_the_token_is_kept_redacted_and_shown_so_to_viewers_and_the_worker(
    app_factory, config_factory, clock, github
):
    api, config, bay, job = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    echoed = {"message": "Validation Failed", "errors": [{"field": "head", "code": "invalid", "message": GITHUB_TOKEN}]}
    github.answer_when(422, echoed, method="POST", path="/pulls")
    assert bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=output(job)).status_code == 200
    deliver(config, clock)
    for reader in (api, bay):
        error = reader.get(f"/api/v1/dispatch/jobs/{job['id']}").json["forge"]["error"]
        assert "[redacted]" in error and GITHUB_TOKEN not in error
    assert GITHUB_TOKEN not in api.get(f"/jobs/{job['id']}").text
    from storage.db import connection
    from storage.models import DispatchJob, OutboxMessage

    with connection():
        kept = [str(v) for row in DispatchJob.select().tuples() for v in row]
        kept += [str(v) for row in OutboxMessage.select().tuples() for v in row]
    assert not [value for value in kept if GITHUB_TOKEN in value]


def test_a_configured_secret_in_a_worker_s_text_never_reaches_the_forge(app_factory, config_factory, clock, github):
    _, config, bay, job = setup(app_factory, config_factory, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    leaky = output(job, pull_request={"title": "t", "body": f"token: {GITHUB_TOKEN}"}, comment=f"again {GITHUB_TOKEN}")
    assert bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=leaky).status_code == 200
    deliver(config, clock)
    written = str(github.written())
    assert GITHUB_TOKEN not in written.replace(f"Bearer {GITHUB_TOKEN}", "") and "token: [redacted]" in written
