"""POST /api/v1/webhooks/forge|ci|tracker: real payloads, real signature schemes, dedup by delivery id."""

import pytest

from events_kit import (
    ALLOWLIST,
    FORGE_SECRET,
    TRACKER_SECRET,
    gate,
    github_headers,
    gitlab_headers,
    linear_headers,
    raw_example,
    seed_board,
)
from testclient import ApiClient

CI_SECRET = "test-ci-secret-0123456789abcdef"


def make_api(app_factory, config_factory, **overrides):
    values = dict(router_allowlist=ALLOWLIST, forge_webhook_secret=FORGE_SECRET, tracker_webhook_secret=TRACKER_SECRET)
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
    assert envelope["forge"] == {"pr_number": 42, "branch": "port-12-login-email"}
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
    api = make_api(app_factory, config_factory, forge_webhook_secret=None)
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


def test_a_webhook_body_must_be_json(api):
    body = b"payload=%7B%7D"
    headers = github_headers("pull_request", "f1", body)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    assert send(api, "forge", body, headers).status_code == 415
    body = b"{not json"
    assert send(api, "forge", body, github_headers("pull_request", "f2", body)).status_code == 400
    assert decisions(api) == []


# -- GitLab --------------------------------------------------------------------------------------------------


def test_a_gitlab_merge_request_with_the_right_token_is_recorded(api):
    body = raw_example("payloads/gitlab/merge_request.update-push.json")
    result = send(api, "forge", body, gitlab_headers("Merge Request Hook", "0b6e4d1c-2f3a-4b5c-8d7e-9f0a1b2c3d4e"))
    assert result.status_code == 202
    assert result.json["event_id"] == "gitlab:0b6e4d1c-2f3a-4b5c-8d7e-9f0a1b2c3d4e"
    envelope = result.json["decision"]["envelope"]
    assert (envelope["source"], envelope["transition"]["kind"]) == ("forge", "synchronized")
    assert envelope["actor"] == {"kind": "agent", "id": "gitlab:project_15_bot_4f1c2a", "roles": []}


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


def test_a_signed_linear_state_change_routes_the_tracked_ticket(api):
    body = raw_example("payloads/linear/issue.update-state-started.json")
    result = send(api, "tracker", body, linear_headers("5f0c2b9e-8d1a-4c3b-a2e4-6b7c8d9e0f12", body))
    assert result.status_code == 202
    decision = result.json["decision"]
    envelope = decision["envelope"]
    assert result.json["event_id"] == "linear:5f0c2b9e-8d1a-4c3b-a2e4-6b7c8d9e0f12"
    assert envelope["transition"] == {"kind": "state_changed", "from": "queued", "to": "execute"}
    assert envelope["subject"]["id"] == "PORT-12"  # found by its tracker_issue_id
    assert envelope["actor"]["kind"] == "human"
    assert (decision["outcome"], decision["role"]) == ("would_dispatch", "coder")


def test_a_linear_payload_without_an_actor_is_blocked_on_authorization(api):
    body = raw_example("payloads/linear/issue.update-state-no-actor.json")
    decision = send(api, "tracker", body, linear_headers("n1", body)).json["decision"]
    assert decision["envelope"]["actor"] == {"kind": "unknown", "id": None, "roles": []}
    assert decision["outcome"] == "blocked"
    assert gate(decision, "authorization")["passed"] is False


@pytest.mark.parametrize("signature", [None, "0" * 64, "sha256=abc"])
def test_a_bad_linear_signature_is_401_and_recorded_nowhere(api, signature):
    body = raw_example("payloads/linear/issue.update-state-started.json")
    headers = linear_headers("x1", body)
    if signature is None:
        del headers["Linear-Signature"]
    else:
        headers["Linear-Signature"] = signature
    assert send(api, "tracker", body, headers).status_code == 401
    assert decisions(api) == []


def test_the_tracker_endpoint_fails_closed_without_a_secret(app_factory, config_factory):
    api = make_api(app_factory, config_factory, tracker_webhook_secret=None)
    body = raw_example("payloads/linear/issue.update-state-started.json")
    assert send(api, "tracker", body, linear_headers("x1", body)).status_code == 401


def test_a_linear_update_that_does_not_change_the_state_is_ignored(api):
    body = raw_example("payloads/linear/issue.update-title.json")
    result = send(api, "tracker", body, linear_headers("t1", body))
    assert result.status_code == 200
    assert "does not change its state" in result.json["ignored"]
    assert decisions(api) == []


def test_webhook_failures_count_towards_the_lockout(app_factory, config_factory):
    api = make_api(app_factory, config_factory)
    body = raw_example("payloads/linear/issue.update-state-started.json")
    for _ in range(10):
        assert (
            send(api, "tracker", body, linear_headers("x1", body, secret="wrong-wrong-wrong-wrong")).status_code == 401
        )
    assert send(api, "tracker", body, linear_headers("x1", body)).status_code == 429
