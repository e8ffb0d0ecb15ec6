"""POST /api/v1/webhooks/forge|ci|tracker, through HTTP, with the senders' own shapes: their payloads and
headers, their signature schemes, their retries and redeliveries, older variants included. Each test says what
is recorded (the decisions before and after), not only the status."""

import json
from datetime import timedelta

import pytest
from dispatch_kit import policy, set_policy

from events_kit import (
    ALLOWLIST,
    FORGE_SECRET,
    GITHUB_SECRET,
    GITLAB_TOKEN,
    TRACKER_SECRET,
    example,
    gate,
    github_headers,
    gitlab_headers,
    hmac_hex,
    http_requests,
    linear_body,
    linear_headers,
    raw_example,
    seed_board,
)
from testclient import ApiClient

CI_SECRET = "test-ci-secret-0123456789abcdef"


def make_api(app_factory, config_factory, **overrides):
    values = dict(
        router_allowlist=ALLOWLIST,
        github_webhook_secret=GITHUB_SECRET,
        gitlab_webhook_token=GITLAB_TOKEN,
        tracker_webhook_secret=TRACKER_SECRET,
    )
    values.update(overrides)
    return ApiClient(app_factory(config_factory(**values)), basic="admin:correct-horse-battery", ci_secret=CI_SECRET)


@pytest.fixture
def api(app_factory, config_factory):
    api = make_api(app_factory, config_factory)
    seed_board(api, tickets={"PORT-12": "queued"})
    return api


def decisions(api):
    return api.get("/api/v1/router/decisions").json["decisions"]


def send(api, endpoint, body, headers):
    return api.post(f"/api/v1/webhooks/{endpoint}", body=body, headers=headers, auth=None)


# -- GitHub --------------------------------------------------------------------------------------------------


def test_a_signed_github_push_to_a_pr_is_recorded_and_waits_for_ci(api):
    body = raw_example("payloads/github/pull_request.synchronize.json")
    result = send(api, "forge", body, github_headers("pull_request", "7d2e1b50-c6a6-11f0-9a3e-2a6b7c8d9e01", body))
    assert result.status_code == 202
    decision = result.json["decision"]
    assert result.json["event_id"] == "github:7d2e1b50-c6a6-11f0-9a3e-2a6b7c8d9e01"
    envelope = decision["envelope"]
    # The seed's errors table: a forge event for a PR whose pipeline has not passed says await_ci.
    assert envelope["dispatch_hints"] == {
        "eligible_for_worker": False,
        "blocked_reason": "await_ci",
        "suggested_role": None,
    }
    assert envelope["actor"] == {"kind": "agent", "id": "github:svc-coder[bot]", "roles": []}
    assert envelope["forge"] == {
        "pr_number": 42,
        "branch": "port-12-login-email",
        "head_sha": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d",  # pull_request.head.sha
    }
    assert (decision["kind"], decision["subject_id"], decision["outcome"]) == ("synchronized", "PORT-12", "no_action")


def test_a_github_redelivery_is_the_same_event_and_records_nothing_new(api):
    body = raw_example("payloads/github/pull_request.opened.json")
    headers = github_headers("pull_request", "6b1f0a40-c6a4-11f0-8d1e-2a6b7c8d9e01", body)
    first = send(api, "forge", body, headers)
    again = send(api, "forge", body, headers)
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json == first.json
    assert len(decisions(api)) == 1


@pytest.mark.parametrize(
    "tamper",
    ["wrong-secret", "body-changed", "missing", "not-hex", "sha1-style"],
)
def test_a_bad_or_missing_github_signature_is_401_and_recorded_nowhere(api, tamper):
    body = raw_example("payloads/github/pull_request.opened.json")
    headers = github_headers("pull_request", "d1", body)
    if tamper == "wrong-secret":
        headers = github_headers("pull_request", "d1", body, secret="not-the-forge-secret-at-all")
    elif tamper == "body-changed":
        body = body.replace(b'"number": 42', b'"number": 43')
    elif tamper == "missing":
        del headers["X-Hub-Signature-256"]
    elif tamper == "not-hex":
        headers["X-Hub-Signature-256"] = "sha256=zz"
    elif tamper == "sha1-style":
        headers["X-Hub-Signature-256"] = headers["X-Hub-Signature-256"].replace("sha256=", "sha1=")
    result = send(api, "forge", body, headers)
    assert result.status_code == 401
    assert result.headers["content-type"] == "application/problem+json"
    assert decisions(api) == []


def test_the_forge_endpoint_fails_closed_without_a_secret(app_factory, config_factory):
    api = make_api(app_factory, config_factory, github_webhook_secret=None, gitlab_webhook_token=None)
    body = raw_example("payloads/github/pull_request.opened.json")
    for headers in (github_headers("pull_request", "d1", body), gitlab_headers("Merge Request Hook", "u1")):
        result = send(api, "forge", body, headers)
        assert result.status_code == 401
        assert "refuses every delivery" in result.json["detail"]
    assert decisions(api) == []


def test_a_workflow_run_at_the_forge_endpoint_is_normalized_as_ci_and_dispatches_the_fixer(api):
    body = raw_example("payloads/github/workflow_run.completed-failure.json")
    result = send(api, "forge", body, github_headers("workflow_run", "c1", body))
    decision = result.json["decision"]
    assert (decision["source"], decision["kind"]) == ("ci", "pipeline_failed")
    assert decision["envelope"]["forge"] == {
        "pr_number": 42,
        "branch": "port-12-login-email",
        "pipeline_id": 11893154871,
        "pipeline_status": "failure",
        "head_sha": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d",  # workflow_run.head_sha
    }
    assert (decision["outcome"], decision["role"]) == ("would_dispatch", "fixer")


def test_a_ping_or_an_unrouted_action_is_acknowledged_and_recorded_nowhere(api):
    ping = raw_example("payloads/github/ping.json")
    result = send(api, "forge", ping, github_headers("ping", "p1", ping))
    assert result.status_code == 200
    assert result.json == {"ignored": "ping: the webhook is set up; nothing to route", "delivery": "p1"}
    labeled = raw_example("payloads/github/pull_request.labeled.json")
    result = send(api, "forge", labeled, github_headers("pull_request", "l1", labeled))
    assert result.json["ignored"] == "pull_request action labeled is not routed"
    assert decisions(api) == []


def test_a_signed_payload_missing_what_github_always_sends_is_422_and_recorded_nowhere(api):
    body = b'{"action": "opened", "pull_request": {"number": 42}}'
    result = send(api, "forge", body, github_headers("pull_request", "m1", body))
    assert result.status_code == 422
    assert result.json["errors"] == [{"path": "/pull_request/head", "message": "is required"}]
    assert decisions(api) == []


def test_a_webhook_body_in_another_media_type_is_415_and_recorded_nowhere(api):
    body = b'{"action": "opened"}'
    headers = github_headers("pull_request", "f1", body)
    headers["Content-Type"] = "text/plain"
    assert send(api, "forge", body, headers).status_code == 415
    form = b"payload=%7B%7D"  # GitHub's form encoding is the forge's; the tracker and CI endpoints take JSON
    assert send(api, "tracker", form, {**linear_headers("f2", form), "Content-Type": FORM}).status_code == 415
    ci = api.post("/api/v1/webhooks/ci", body=form, auth="ci", headers={"Content-Type": FORM})
    assert ci.status_code == 415
    body = b"{not json"
    assert send(api, "forge", body, github_headers("pull_request", "f3", body)).status_code == 400
    assert decisions(api) == []


# -- GitHub: form-encoded deliveries ---------------------------------------------------------------------------

FORM = "application/x-www-form-urlencoded"


def test_a_form_encoded_github_delivery_is_accepted_and_is_the_same_event_as_its_json(api):
    (request,) = http_requests("payloads/github/pull_request.opened.form.http")
    assert request.headers["Content-Type"] == FORM
    result = send(api, "forge", request.body, request.headers)  # byte for byte as GitHub sends it
    assert result.status_code == 202, result.text
    assert result.json["event_id"] == "github:0f3e5a2c-c6a5-11f0-8e7d-2a6b7c8d9e01"
    decision = result.json["decision"]
    assert (decision["kind"], decision["subject_id"], decision["outcome"]) == ("opened", "PORT-12", "no_action")
    assert decision["envelope"]["forge"] == {
        "pr_number": 42,
        "branch": "port-12-login-email",
        "head_sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
    }
    # The same event as JSON (a redelivery after the webhook's content type was changed): nothing new.
    body = raw_example("payloads/github/pull_request.opened.json")
    again = send(api, "forge", body, github_headers("pull_request", "6b1f0a40-c6a4-11f0-8d1e-2a6b7c8d9e01", body))
    assert (again.status_code, again.json) == (200, result.json)
    assert [d["id"] for d in decisions(api)] == [decision["id"]]


def test_a_form_encoded_delivery_is_signed_over_the_bytes_as_sent_not_the_json_inside(api):
    (request,) = http_requests("payloads/github/pull_request.opened.form.http")
    inner = json.dumps(example("payloads/github/pull_request.opened.json"), separators=(",", ":")).encode()
    wrong = {**request.headers, "X-Hub-Signature-256": "sha256=" + hmac_hex(GITHUB_SECRET, inner)}
    result = send(api, "forge", request.body, wrong)
    assert result.status_code == 401
    assert decisions(api) == []


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"action=opened", "no payload field"),
        (b"payload=%7B%7D&payload=%7B%7D", "2 payload fields"),
        (b"payload=%7Bnot-json", "not valid JSON"),
        (b"payload=%FF", "cannot be read"),
    ],
)
def test_a_form_encoded_delivery_without_one_json_payload_is_400_and_recorded_nowhere(api, body, why):
    headers = {**github_headers("pull_request", "form-1", body), "Content-Type": FORM}
    result = send(api, "forge", body, headers)
    assert result.status_code == 400
    assert why in result.json["detail"]
    assert decisions(api) == []


def test_a_signed_body_holding_a_lone_surrogate_escape_is_400_and_recorded_nowhere(api):
    # It was a 500: the same-event key hashes the body as UTF-8 text, which cannot hold half a surrogate pair.
    text = raw_example("payloads/github/pull_request.opened.json").decode()
    body = text.replace('"title": "', '"title": "\\udc80', 1).encode()
    result = send(api, "forge", body, github_headers("pull_request", "lone-surrogate", body))
    assert result.status_code == 400
    unpaired = {"path": "/pull_request/title", "message": "contains an unpaired UTF-16 surrogate"}
    assert result.json["errors"] == [unpaired]
    assert decisions(api) == []


def test_a_github_delivery_replayed_under_another_delivery_id_is_the_same_event(api):
    # X-GitHub-Delivery is not signed: anyone who saw a delivery can send its signed body again under a new id.
    body = raw_example("payloads/github/workflow_run.completed-failure.json")
    first = send(api, "forge", body, github_headers("workflow_run", "a7c1e3f0-c6a6-11f0-9b2d-2a6b7c8d9e01", body))
    assert (first.status_code, first.json["decision"]["role"]) == (202, "fixer")
    replayed = send(api, "forge", body, github_headers("workflow_run", "ffffffff-0000-4000-8000-000000000001", body))
    assert replayed.status_code == 200
    assert replayed.json == first.json  # the first event's own id and decision, nothing new
    assert len(decisions(api)) == 1
    # A re-run of the same workflow is a new event: GitHub sends a new body (run_attempt 2).
    document = json.loads(body)
    document["workflow_run"].update(run_attempt=2, updated_at="2026-11-20T10:14:02Z")
    rerun = json.dumps(document).encode()
    second = send(api, "forge", rerun, github_headers("workflow_run", "b8d2f4a1-c6a6-11f0-9b2d-2a6b7c8d9e01", rerun))
    assert second.status_code == 202
    assert len(decisions(api)) == 2


def test_a_webhook_events_envelope_sent_again_to_the_events_endpoint_is_a_duplicate(api):
    body = raw_example("payloads/github/pull_request.synchronize.json")
    first = send(api, "forge", body, github_headers("pull_request", "e1f2a3b4-c6a9-11f0-8b3c-2a6b7c8d9e01", body))
    again = api.post("/api/v1/events", json=first.json["decision"]["envelope"], auth="ci")
    assert (again.status_code, again.json) == (200, first.json)
    assert len(decisions(api)) == 1


def test_a_workflow_waiting_for_approval_is_a_manual_pipeline_not_a_pending_one(api):
    # octokit's requested.with-conclusion: action requested, status completed, conclusion action_required.
    body = raw_example("payloads/github/workflow_run.requested-action_required.json")
    result = send(api, "forge", body, github_headers("workflow_run", "c9e3a5b2-c6a7-11f0-8f1e-2a6b7c8d9e01", body))
    assert result.status_code == 202
    envelope = result.json["decision"]["envelope"]
    assert envelope["transition"] == {"kind": "pipeline_started", "from": None, "to": "manual"}
    assert envelope["forge"] == {
        "pr_number": None,  # GitHub names no pull request for a run from a fork
        "branch": "port-12-login-hint-typo",
        "pipeline_id": 11894502216,
        "pipeline_status": "manual",
        "head_sha": "5e7a91c0d2b34f6a8c9d0e1f2a3b4c5d6e7f8a9b",
    }
    assert [(d["kind"], d["subject_id"], d["outcome"]) for d in decisions(api)] == [
        ("pipeline_started", "PORT-12", "no_action")
    ]


# -- ticket keys in branches and titles ------------------------------------------------------------------------


def pr_with(branch: str, title: str, number: int = 42) -> bytes:
    document = example("payloads/github/pull_request.opened.json")
    document["number"] = document["pull_request"]["number"] = number
    document["pull_request"]["head"]["ref"] = branch
    document["pull_request"]["title"] = title
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("branch", "title"),
    [
        ("dependabot/npm_and_yarn/lodash-4.17.21", "Bump lodash from 4.17.20 to 4.17.21"),
        ("renovate/node-18.x", "Update dependency node to v18"),
        ("gh-readonly-queue/main/pr-42-6dcb09b5b57875f334f61aebed695e2e4193db5e", "Login form keeps the email"),
        ("fix-encoding", "Fix UTF-8 handling"),
        ("hashing", "Upgrade to SHA-256"),
        # PORT-12 is on the board, but not inside another word, nor in a title written in lower case.
        ("xport-12-csv", "Xport: write the CSV header once"),
        ("export/sport-12", "EXPORT-12 dialog"),
        ("fix-login", "port-12 login keeps the email"),
    ],
)
def test_a_word_number_whose_prefix_the_board_does_not_know_names_no_ticket(api, branch, title):
    body = pr_with(branch, title, number=61)
    result = send(api, "forge", body, github_headers("pull_request", f"phantom-{branch[:20]}", body))
    assert result.status_code == 202
    assert result.json["decision"]["envelope"]["subject"] == {
        "type": "pull_request",
        "id": "acme/portfolio#61",
        "repo": "acme/portfolio",
    }
    assert [(d["subject_id"], d["outcome"]) for d in decisions(api)] == [("acme/portfolio#61", "blocked")]


def test_dependabots_own_delivery_names_no_ticket(api):
    body = raw_example("payloads/github/pull_request.opened-dependabot.json")
    result = send(api, "forge", body, github_headers("pull_request", "d4f5a6b7-c6a8-11f0-8a2b-2a6b7c8d9e01", body))
    decision = result.json["decision"]
    assert (decision["subject_id"], decision["envelope"]["actor"]["id"]) == (
        "acme/portfolio#61",
        "github:dependabot[bot]",
    )
    assert gate(decision, "agreement") == {
        "gate": "agreement",
        "passed": False,
        "reason": "no initiative is known for the subject",
    }


@pytest.mark.parametrize(
    ("branch", "key"),
    [
        ("port-12-login", "PORT-12"),  # a ticket on the board
        ("feature/PORT-99", "PORT-99"),  # not on the board yet, but its prefix is the board's
        ("hotfix/port-12_typo", "PORT-12"),
        # Several candidates: the first whose prefix the board knows, after any it does not.
        ("release-2026/port-12-login", "PORT-12"),
        ("dependabot/lodash-4.17.21/PORT-12_PORT-13", "PORT-12"),
    ],
)
def test_a_key_whose_prefix_the_board_knows_names_its_ticket(api, branch, key):
    body = pr_with(branch, "Some work")
    result = send(api, "forge", body, github_headers("pull_request", f"known-{key}", body))
    assert result.json["decision"]["subject_id"] == key
    assert [d["subject_id"] for d in decisions(api)] == [key]


def test_a_ticket_created_after_the_first_delivery_is_recognised_at_once(api):
    first = pr_with("bill-2-retries", "Retry failed payment webhooks", number=70)
    assert (
        send(api, "forge", first, github_headers("pull_request", "bill-1", first)).json["decision"]["subject_id"]
        == "acme/portfolio#70"
    )
    created = api.post(
        "/api/v1/tickets", json={"key": "BILL-2", "initiative_id": "portfolio", "title": "Retry failed webhooks"}
    )
    assert created.status_code == 201
    again = pr_with("bill-2-retries", "Retry failed payment webhooks (take two)", number=71)
    assert (
        send(api, "forge", again, github_headers("pull_request", "bill-2", again)).json["decision"]["subject_id"]
        == "BILL-2"
    )


def test_configured_prefixes_count_beside_the_boards(app_factory, config_factory):
    api = make_api(app_factory, config_factory, ticket_prefixes=frozenset({"WEB"}))
    seed_board(api, tickets={"PORT-12": "queued"})
    body = pr_with("web-43-tooltip-font", "Very small font in tooltip", number=80)
    result = send(api, "forge", body, github_headers("pull_request", "web-43", body))
    assert result.json["decision"]["subject_id"] == "WEB-43"
    assert gate(result.json["decision"], "agreement")["reason"] == "no initiative is known for the subject"


# -- GitLab --------------------------------------------------------------------------------------------------


def test_a_gitlab_merge_request_with_the_right_token_is_recorded(api):
    body = raw_example("payloads/gitlab/merge_request.update-push.json")
    headers = gitlab_headers(
        "Merge Request Hook", "0b6e4d1c-2f3a-4b5c-8d7e-9f0a1b2c3d4e", idempotency_key="5e2a7c90-1d4b-4f3e-a6c8"
    )
    result = send(api, "forge", body, headers)
    assert result.status_code == 202
    assert result.json["event_id"] == "gitlab:5e2a7c90-1d4b-4f3e-a6c8"  # GitLab's own name for the delivery
    envelope = result.json["decision"]["envelope"]
    assert (envelope["source"], envelope["transition"]["kind"]) == ("forge", "synchronized")
    assert envelope["actor"] == {"kind": "agent", "id": "gitlab:project_15_bot_4f1c2a", "roles": []}
    assert len(decisions(api)) == 1


def test_the_hooks_of_one_gitlab_action_are_separate_events_and_a_retry_is_one_of_them(api):
    merge, pipeline, retry = http_requests("payloads/gitlab/merge.deliveries.http")
    # One action, one X-Gitlab-Event-UUID for every hook it triggered.
    assert merge.headers["X-Gitlab-Event-UUID"] == pipeline.headers["X-Gitlab-Event-UUID"]
    first = send(api, "forge", merge.body, merge.headers)
    second = send(api, "forge", pipeline.body, pipeline.headers)
    assert (first.status_code, second.status_code) == (202, 202)
    assert (first.json["event_id"], second.json["event_id"]) == (
        "gitlab:4c1d9e57-0a6b-4f2e-9d83-b2a7c6f5e041",
        "gitlab:e8b73f20-5c49-4d1a-8e6f-37a9d0c2b5e8",
    )
    recorded = decisions(api)
    assert [(d["source"], d["kind"], d["subject_id"]) for d in recorded] == [
        ("ci", "pipeline_passed", "PORT-12"),
        ("forge", "merged", "PORT-12"),
    ]
    # GitLab's retry of the merge: its own event's answer (never the pipeline's), and nothing new.
    again = send(api, "forge", retry.body, retry.headers)
    assert (again.status_code, again.json) == (200, first.json)
    assert decisions(api) == recorded


def test_without_an_idempotency_key_gitlab_events_are_told_apart_by_their_bodies(api):
    # GitLab before 17.4 sends no Idempotency-Key; X-Gitlab-Event-UUID alone would fold one action's hooks.
    shared = "2d8a6f3e-4b5c-4d6e-8f9a-1b2c3d4e5f60"
    opened = raw_example("payloads/gitlab/merge_request.open.json")
    merged = raw_example("payloads/gitlab/merge_request.merge.json")
    failed = raw_example("payloads/gitlab/pipeline.failed.json")
    answers = [
        send(api, "forge", body, gitlab_headers(event, shared))
        for event, body in [
            ("Merge Request Hook", opened),
            ("Merge Request Hook", merged),
            ("Pipeline Hook", failed),
        ]
    ]
    assert [a.status_code for a in answers] == [202, 202, 202]
    assert len({a.json["event_id"] for a in answers}) == 3
    assert all(a.json["event_id"].startswith(f"gitlab:{shared}.") for a in answers)
    assert sorted(d["kind"] for d in decisions(api)) == ["merged", "opened", "pipeline_failed"]
    # A resend of the merge, even with its members reordered (GitLab resends from its stored log): the same event.
    resent = json.dumps(json.loads(merged), sort_keys=True).encode()
    again = send(api, "forge", resent, gitlab_headers("Merge Request Hook", shared))
    assert (again.status_code, again.json) == (200, answers[1].json)
    assert len(decisions(api)) == 3


def test_an_idempotency_key_with_another_body_is_another_event_never_the_first_ones_answer(api):
    headers = gitlab_headers("Merge Request Hook", "u-1", idempotency_key="0d9c8b7a-6f5e-4d3c-b2a1-0f9e8d7c6b5a")
    first = send(api, "forge", raw_example("payloads/gitlab/merge_request.open.json"), headers)
    other = send(api, "forge", raw_example("payloads/gitlab/merge_request.close.json"), headers)
    assert (first.status_code, other.status_code) == (202, 202)
    assert other.json["decision"]["id"] != first.json["decision"]["id"]
    assert sorted(d["kind"] for d in decisions(api)) == ["closed", "opened"]


def test_a_wrong_gitlab_token_is_401_and_recorded_nowhere(api):
    body = raw_example("payloads/gitlab/merge_request.open.json")
    result = send(api, "forge", body, gitlab_headers("Merge Request Hook", "u1", token="guess-guess-guess-guess"))
    assert result.status_code == 401
    assert decisions(api) == []


def test_a_gitlab_pipeline_at_the_forge_endpoint_is_normalized_as_ci(api):
    body = raw_example("payloads/gitlab/pipeline.failed.json")
    result = send(api, "forge", body, gitlab_headers("Pipeline Hook", "2d8a6f3e-4b5c-4d6e-8f9a-1b2c3d4e5f60"))
    decision = result.json["decision"]
    assert (decision["source"], decision["kind"], decision["outcome"], decision["role"]) == (
        "ci",
        "pipeline_failed",
        "would_dispatch",
        "fixer",
    )


# -- who sent it: the sender whose credential verified the delivery, never a header --------------------------


def test_a_github_delivery_signed_with_the_gitlab_token_is_401_and_recorded_nowhere(api):
    # GitLab sends its token in plaintext on every delivery: whoever saw it once (a proxy log) must not be able to
    # sign as GitHub with it. Each sender is verified with its own credential.
    body = raw_example("payloads/github/pull_request.opened.json")
    forged = github_headers("pull_request", "forged-1", body, secret=GITLAB_TOKEN)
    result = send(api, "forge", body, forged)
    assert result.status_code == 401
    assert result.headers["content-type"] == "application/problem+json"
    assert decisions(api) == []
    # ...and GitHub's key is no GitLab token either.
    body = raw_example("payloads/gitlab/merge_request.open.json")
    assert send(api, "forge", body, gitlab_headers("Merge Request Hook", "u-f", token=GITHUB_SECRET)).status_code == 401
    assert decisions(api) == []


def test_an_install_with_only_the_shared_forge_secret_keeps_working_and_health_names_it(app_factory, config_factory):
    api = make_api(
        app_factory,
        config_factory,
        github_webhook_secret=None,
        gitlab_webhook_token=None,
        forge_webhook_secret=FORGE_SECRET,
    )
    github_body = raw_example("payloads/github/pull_request.opened.json")
    github = send(
        api, "forge", github_body, github_headers("pull_request", "d-legacy", github_body, secret=FORGE_SECRET)
    )
    gitlab_body = raw_example("payloads/gitlab/merge_request.open.json")
    gitlab = send(api, "forge", gitlab_body, gitlab_headers("Merge Request Hook", "u-legacy", token=FORGE_SECRET))
    assert (github.status_code, gitlab.status_code) == (202, 202)
    assert sorted(d["event_id"].split(":")[0] for d in decisions(api)) == ["github", "gitlab"]
    health = api.get("/healthz", auth=None)
    assert health.status_code == 200  # the API serves; the check says what to change
    assert health.json["status"] == "degraded"
    check = health.json["checks"]["forge_secret"]
    assert check["ok"] is False
    assert "SVC_GITHUB_WEBHOOK_SECRET" in check["detail"] and "SVC_GITLAB_WEBHOOK_TOKEN" in check["detail"]


def test_the_shared_forge_secret_stands_in_only_for_the_sender_without_its_own(app_factory, config_factory):
    api = make_api(app_factory, config_factory, gitlab_webhook_token=None, forge_webhook_secret=FORGE_SECRET)
    body = raw_example("payloads/github/pull_request.opened.json")
    assert send(api, "forge", body, github_headers("pull_request", "d-s", body, secret=FORGE_SECRET)).status_code == 401
    gitlab_body = raw_example("payloads/gitlab/merge_request.open.json")
    headers = gitlab_headers("Merge Request Hook", "u-s", token=FORGE_SECRET)
    assert send(api, "forge", gitlab_body, headers).status_code == 202
    check = api.get("/healthz", auth=None).json["checks"]["forge_secret"]
    assert check["ok"] is True and "stands in for SVC_GITLAB_WEBHOOK_TOKEN" in check["detail"]


def test_a_wrong_github_signature_is_401_even_beside_a_right_gitlab_token(api):
    # A GitHub signature makes the delivery GitHub's or no one's: it does not fall through to the GitLab token.
    body = raw_example("payloads/gitlab/merge_request.open.json")
    headers = {**gitlab_headers("Merge Request Hook", "u-wrong-sig"), "X-Hub-Signature-256": "sha256=" + "0" * 64}
    assert send(api, "forge", body, headers).status_code == 401
    assert decisions(api) == []


def test_a_github_signed_delivery_cannot_pass_for_gitlab_by_its_event_header(api):
    # GitHub's credential verified it, so it is read as GitHub's: X-Gitlab-Event, which anyone can set, names no
    # sender here, and without X-GitHub-Event the delivery says nothing GitHub would.
    body = raw_example("payloads/gitlab/merge_request.open.json")
    headers = {
        "Content-Type": "application/json",
        "X-Gitlab-Event": "Merge Request Hook",
        "X-Hub-Signature-256": "sha256=" + hmac_hex(GITHUB_SECRET, body),
    }
    result = send(api, "forge", body, headers)
    assert result.status_code == 422 and "X-GitHub-Event" in result.json["errors"][0]["message"]
    assert decisions(api) == []


def test_a_gitlab_delivery_names_its_event_in_x_gitlab_event(api):
    body = raw_example("payloads/gitlab/merge_request.open.json")
    headers = gitlab_headers("Merge Request Hook", "u-no-event")
    del headers["X-Gitlab-Event"]
    headers["X-GitHub-Event"] = "pull_request"  # a header anyone can add makes it no GitHub delivery
    result = send(api, "forge", body, headers)
    assert result.status_code == 422 and "X-Gitlab-Event" in result.json["errors"][0]["message"]
    assert decisions(api) == []


# -- our own CI ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        ("gitlab/pipeline.success.json", "pipeline_passed"),
        ("github/workflow_run.completed-failure.json", "pipeline_failed"),
    ],
)
def test_ci_reports_with_the_ci_secret_need_no_forge_headers(api, payload, kind):
    body = raw_example("payloads/" + payload)
    result = api.post("/api/v1/webhooks/ci", body=body, auth="ci", headers={"Content-Type": "application/json"})
    assert result.status_code == 202
    assert (result.json["decision"]["source"], result.json["decision"]["kind"]) == ("ci", kind)
    # Without a delivery header, the body's hash is the event id: the same report again is the same event.
    again = api.post("/api/v1/webhooks/ci", body=body, auth="ci", headers={"Content-Type": "application/json"})
    assert again.status_code == 200
    assert again.json["event_id"] == result.json["event_id"]


def test_a_ci_report_with_an_event_header_is_read_as_that_senders(api):
    # Our CI may forward a delivery with its headers: the event header says whose it is, before the body's shape.
    body = raw_example("payloads/github/pull_request.opened.json")
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "ci-fwd-1"}
    result = api.post("/api/v1/webhooks/ci", body=body, auth="ci", headers=headers)
    assert result.status_code == 202
    assert (result.json["decision"]["source"], result.json["decision"]["kind"]) == ("forge", "opened")


def test_ci_reports_need_the_ci_secret(api):
    body = raw_example("payloads/gitlab/pipeline.failed.json")
    result = api.post("/api/v1/webhooks/ci", body=body, auth="basic", headers={"Content-Type": "application/json"})
    assert result.status_code == 401
    assert decisions(api) == []


def test_a_ci_report_in_neither_shape_is_422(api):
    result = api.post("/api/v1/webhooks/ci", json={"status": "failed"}, auth="ci")
    assert result.status_code == 422
    assert decisions(api) == []


# -- Linear --------------------------------------------------------------------------------------------------

STARTED = "payloads/linear/issue.update-state-started.json"
OLDER = "payloads/linear/issue.update-state-started.2023.json"


def test_a_signed_linear_state_change_routes_the_tracked_ticket_judged_by_its_actor(api, clock):
    body = linear_body(STARTED, at=clock.now)
    result = send(api, "tracker", body, linear_headers("5f0c2b9e-8d1a-4c3b-a2e4-6b7c8d9e0f12", body))
    assert result.status_code == 202
    decision = result.json["decision"]
    envelope = decision["envelope"]
    assert result.json["event_id"] == "linear:5f0c2b9e-8d1a-4c3b-a2e4-6b7c8d9e0f12"
    assert envelope["transition"] == {"kind": "state_changed", "from": "queued", "to": "execute"}
    assert envelope["subject"]["id"] == "PORT-12"  # found by its tracker_issue_id
    # A current Linear delivery names who acted: the authorization gate checks them against the allowlist.
    assert envelope["actor"] == {"kind": "human", "id": "linear:6d3a8c8e-3b1f-4b9e-a2c4-9f7d1e2b3c4d", "roles": []}
    assert (
        gate(decision, "authorization")["reason"]
        == "actor linear:6d3a8c8e-3b1f-4b9e-a2c4-9f7d1e2b3c4d is on the allowlist"
    )
    assert (decision["outcome"], decision["role"]) == ("would_dispatch", "coder")


def test_a_linear_payload_without_an_actor_is_blocked_on_authorization(api, clock):
    body = linear_body("payloads/linear/issue.update-state-no-actor.json", at=clock.now)
    decision = send(api, "tracker", body, linear_headers("n1", body)).json["decision"]
    assert decision["envelope"]["actor"] == {"kind": "unknown", "id": None, "roles": []}
    assert decision["outcome"] == "blocked"
    assert gate(decision, "authorization") == {
        "gate": "authorization",
        "passed": False,
        "reason": "actor kind unknown fails closed",
    }


@pytest.mark.parametrize("signature", [None, "0" * 64, "sha256=abc"])
def test_a_bad_linear_signature_is_401_and_recorded_nowhere(api, clock, signature):
    body = linear_body(STARTED, at=clock.now)
    headers = linear_headers("x1", body)
    if signature is None:
        del headers["Linear-Signature"]
    else:
        headers["Linear-Signature"] = signature
    assert send(api, "tracker", body, headers).status_code == 401
    assert decisions(api) == []


def test_the_tracker_endpoint_fails_closed_without_a_secret(app_factory, config_factory, clock):
    api = make_api(app_factory, config_factory, tracker_webhook_secret=None)
    body = linear_body(STARTED, at=clock.now)
    assert send(api, "tracker", body, linear_headers("x1", body)).status_code == 401


def test_a_linear_update_that_does_not_change_the_state_is_ignored(api, clock):
    body = linear_body("payloads/linear/issue.update-title.json", at=clock.now)
    result = send(api, "tracker", body, linear_headers("t1", body))
    assert result.status_code == 200
    assert "does not change its state" in result.json["ignored"]
    assert decisions(api) == []


def test_webhook_failures_count_towards_the_lockout(app_factory, config_factory, clock):
    api = make_api(app_factory, config_factory)
    body = linear_body(STARTED, at=clock.now)
    for _ in range(10):
        wrong = linear_headers("x1", body, secret="wrong-wrong-wrong-wrong")
        assert send(api, "tracker", body, wrong).status_code == 401
    assert send(api, "tracker", body, linear_headers("x1", body)).status_code == 429


def test_deliveries_without_a_signature_are_refused_but_not_counted(app_factory, config_factory, clock):
    # A hook set up without its secret sends no signature at all: that is a missing credential, not a guess, and
    # a lockout would refuse the same sender's correctly signed deliveries.
    api = make_api(app_factory, config_factory)
    body = linear_body(STARTED, at=clock.now)
    unsigned = {k: v for k, v in linear_headers("x1", body).items() if k != "Linear-Signature"}
    for _ in range(30):
        assert send(api, "tracker", body, unsigned).status_code == 401
    assert send(api, "tracker", body, linear_headers("x1", body)).status_code == 202
    assert len(decisions(api)) == 1


def test_a_wrong_signature_and_none_say_which_and_name_the_right_secret(api, clock):
    body = raw_example("payloads/github/pull_request.opened.json")
    github = github_headers("pull_request", "d1", body)
    wrong_github = github_headers("pull_request", "d1", body, secret="not-the-github-secret-at-all")
    wrong_gitlab = gitlab_headers("Merge Request Hook", "u1", token="not-the-gitlab-token-at-all")
    neither = {k: v for k, v in github.items() if k != "X-Hub-Signature-256"}
    github_words = (
        "a GitHub X-Hub-Signature-256 signature (the HMAC-SHA256 of the body) made with the GitHub webhook "
        "secret (SVC_GITHUB_WEBHOOK_SECRET)"
    )
    gitlab_words = "a GitLab X-Gitlab-Token equal to the GitLab webhook token (SVC_GITLAB_WEBHOOK_TOKEN)"
    answers = {
        name: send(api, "forge", body, headers)
        for name, headers in (("github", wrong_github), ("gitlab", wrong_gitlab), ("neither", neither))
    }
    assert {name: a.status_code for name, a in answers.items()} == dict.fromkeys(answers, 401)
    assert answers["github"].json["detail"] == (
        f"wrong signature: the X-Hub-Signature-256 does not match this body; the endpoint needs {github_words}"
    )
    assert answers["gitlab"].json["detail"] == (
        f"wrong token: the X-Gitlab-Token is not the GitLab webhook token; the endpoint needs {gitlab_words}"
    )
    assert answers["neither"].json["detail"] == (
        f"no signature: this delivery carries neither {github_words}, nor {gitlab_words}"
    )
    tracker = linear_body(STARTED, at=clock.now)
    wrong_linear = send(api, "tracker", tracker, linear_headers("x1", tracker, secret="wrong-wrong-wrong-wrong"))
    unsigned = {k: v for k, v in linear_headers("x1", tracker).items() if k != "Linear-Signature"}
    no_linear = send(api, "tracker", tracker, unsigned)
    linear_words = (
        "a Linear-Signature signature (the HMAC-SHA256 of the body) made with the tracker webhook secret "
        "(SVC_TRACKER_WEBHOOK_SECRET)"
    )
    assert wrong_linear.json["detail"] == (
        f"wrong signature: the Linear-Signature does not match this body; the endpoint needs {linear_words}"
    )
    assert no_linear.json["detail"] == (
        f"no signature: this delivery carries no Linear-Signature; the endpoint needs {linear_words}"
    )
    assert decisions(api) == []


# -- Linear: the replay window ------------------------------------------------------------------------------------


def test_a_captured_2023_delivery_is_refused_as_stale_and_recorded_nowhere(api):
    body = raw_example(OLDER)  # signed correctly, but signed in April 2023
    result = send(api, "tracker", body, linear_headers("2b7d1c3e-2023-4f6a-9e8d-7c6b5a4f3e2d", body))
    assert result.status_code == 401
    assert result.headers["content-type"] == "application/problem+json"
    assert result.json["type"].endswith("/stale-delivery")
    assert "webhookTimestamp" in result.json["detail"]
    assert "replay window of 60 s" in result.json["detail"]
    assert decisions(api) == []


@pytest.mark.parametrize(("offset", "status"), [(-59, 202), (-61, 401), (59, 202), (61, 401)])
def test_the_replay_window_is_60_seconds_either_way(api, clock, offset, status):
    body = linear_body(STARTED, at=clock.now + timedelta(seconds=offset))
    result = send(api, "tracker", body, linear_headers(f"w{offset}", body))
    assert result.status_code == status
    assert len(decisions(api)) == (1 if status == 202 else 0)


def test_the_replay_window_is_configurable(app_factory, config_factory, clock):
    api = make_api(app_factory, config_factory, webhook_tolerance_seconds=300)
    seed_board(api, tickets={"PORT-12": "queued"})
    late = linear_body(STARTED, at=clock.now - timedelta(seconds=240))
    assert send(api, "tracker", late, linear_headers("late", late)).status_code == 202
    later = linear_body("payloads/linear/issue.update-state-in-review.json", at=clock.now - timedelta(seconds=301))
    result = send(api, "tracker", later, linear_headers("later", later))
    assert result.status_code == 401
    assert "replay window of 300 s" in result.json["detail"]
    assert len(decisions(api)) == 1


def test_a_linear_delivery_with_no_signed_time_is_refused(api):
    document = example(STARTED)
    del document["webhookTimestamp"]
    body = json.dumps(document).encode()
    result = send(api, "tracker", body, linear_headers("no-time", body))
    assert result.status_code == 401
    assert "carries no signed webhookTimestamp" in result.json["detail"]
    assert decisions(api) == []


def test_stale_but_correctly_signed_deliveries_do_not_lock_the_sender_out(api, clock):
    stale = raw_example(OLDER)
    for attempt in range(12):
        assert send(api, "tracker", stale, linear_headers(f"old-{attempt}", stale)).status_code == 401
    fresh = linear_body(STARTED, at=clock.now)
    assert send(api, "tracker", fresh, linear_headers("fresh", fresh)).status_code == 202
    assert len(decisions(api)) == 1


def test_the_same_signed_linear_body_is_one_event_whatever_linear_delivery_comes_with_it(api, clock):
    body = linear_body(STARTED, at=clock.now)
    first = send(api, "tracker", body, linear_headers("5f0c2b9e-8d1a-4c3b-a2e4-6b7c8d9e0f12", body))
    replayed = send(api, "tracker", body, linear_headers("00000000-0000-4000-8000-00000000beef", body))
    assert (first.status_code, replayed.status_code) == (202, 200)
    assert replayed.json == first.json
    # Linear's own retry a minute later carries a fresh signed time: still the same event.
    clock.advance(seconds=70)
    retry = linear_body(STARTED, at=clock.now)
    assert retry != body
    again = send(api, "tracker", retry, linear_headers("5f0c2b9e-8d1a-4c3b-a2e4-6b7c8d9e0f12", retry))
    assert (again.status_code, again.json) == (200, first.json)
    assert len(decisions(api)) == 1


# -- Linear: older deliveries ---------------------------------------------------------------------------------


def test_an_older_delivery_without_an_identifier_names_the_issue_from_its_team_and_number(api, clock):
    body = linear_body(OLDER, at=clock.now)
    result = send(api, "tracker", body, linear_headers("older-1", body))
    assert result.status_code == 202, result.text
    decision = result.json["decision"]
    assert decision["subject_id"] == "PORT-14"
    assert decision["envelope"]["subject"]["tracker_issue_id"] == "8c1f0e52-6b3d-4a7e-9d21-f4a5b6c7d8e9"
    assert decision["envelope"]["occurred_at"] == "2023-04-12T08:41:17.205000Z"
    # Older deliveries name no actor: the authorization gate sees kind unknown and fails closed.
    assert decision["envelope"]["actor"] == {"kind": "unknown", "id": None, "roles": []}
    assert (decision["outcome"], decision["role"]) == ("blocked", "coder")
    assert [d["subject_id"] for d in decisions(api)] == ["PORT-14"]


def test_an_older_delivery_without_its_team_names_the_issue_from_its_url(api, clock):
    document = json.loads(linear_body(OLDER, at=clock.now))
    del document["data"]["team"]
    body = json.dumps(document).encode()
    result = send(api, "tracker", body, linear_headers("older-2", body))
    assert result.status_code == 202
    assert result.json["decision"]["subject_id"] == "PORT-14"


def test_a_delivery_that_names_its_issue_nowhere_is_422_and_recorded_nowhere(api, clock):
    document = json.loads(linear_body(OLDER, at=clock.now))
    del document["data"]["team"], document["url"]
    body = json.dumps(document).encode()
    result = send(api, "tracker", body, linear_headers("older-3", body))
    assert result.status_code == 422
    assert result.json["errors"] == [
        {
            "path": "/data/identifier",
            "message": "is required (or data.team.key with data.number, or a url naming the issue)",
        }
    ]
    assert decisions(api) == []


# -- the retry budget gates fixers only -----------------------------------------------------------------------


def failed_run(attempt: int) -> bytes:
    """The workflow failing again on a new head (a fixer pushed in between)."""
    document = example("payloads/github/workflow_run.completed-failure.json")
    document["workflow_run"].update(
        run_attempt=attempt, updated_at=f"2026-11-20T09:{10 + attempt}:00Z", head_sha=f"{attempt:x}" * 40
    )
    return json.dumps(document).encode()


def test_a_used_up_retry_budget_blocks_the_fixer_but_not_a_coder(api, clock):
    set_policy(api, policy(live=("fixer",)))
    for attempt in (1, 2, 3):
        body = failed_run(attempt)
        send(api, "forge", body, github_headers("workflow_run", f"run-{attempt}", body))
    # Two fixer jobs since the last green pipeline (the budget): the third red pipeline, on a new head, is stuck.
    assert [(d["outcome"], d["role"], d["dispatched"]) for d in reversed(decisions(api))] == [
        ("would_dispatch", "fixer", True),
        ("would_dispatch", "fixer", True),
        ("stuck", "fixer", False),
    ]
    assert api.get("/api/v1/tickets/PORT-12").json["stage"] == "blocked"
    body = linear_body(STARTED, at=clock.now)
    decision = send(api, "tracker", body, linear_headers("start", body)).json["decision"]
    assert (decision["subject_id"], decision["outcome"], decision["role"]) == ("PORT-12", "would_dispatch", "coder")
    assert gate(decision, "retry_budget") == {
        "gate": "retry_budget",
        "passed": True,
        "reason": "no fixer rule would dispatch for this event; the budget gates fixers only",
    }
    assert len(decisions(api)) == 4
