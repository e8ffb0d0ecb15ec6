"""Logs and credentials, as real processes show them: a request's log line carries the id its answer's
`X-Request-Id` header names; no secret ever reaches a log or an error body; repeated failed credentials are
slowed with 429 and `Retry-After`."""

import base64
import json
import uuid
from datetime import UTC, datetime

import pytest
import requests

from events_kit import github_headers, gitlab_headers, linear_body, linear_headers, raw_example
from processes import ServiceProcess, start_service, svc_env, wait_until
from servers.discord import FakeDiscord
from servers.linear import FakeLinear

pytestmark = pytest.mark.process

CI = "ci-secret-never-in-a-log-7f3a9c2e1b5d"
USER, PASSWORD = "ops", "basic-password-never-in-a-log-4d8e2a"
GITHUB = "github-secret-never-in-a-log-9a1b2c3d4e"
GITLAB = "gitlab-token-never-in-a-log-0f1e2d3c4b"
TRACKER = "tracker-secret-never-in-a-log-5e6f7a8b9c"
TRACKER_KEY = "lin_api_key_never_in_a_log_0123456789abcdef"
DISCORD_TOKEN = "discord-token-never-in-a-log_0123456789abcdefABCDEF"


def test_a_requests_log_line_carries_the_id_of_its_answers_header(tmp_path, database_url):
    server, base = start_service(tmp_path, database_url, SVC_CI_WEBHOOK_SECRET=CI, SVC_BASIC_AUTH=f"{USER}:{PASSWORD}")
    try:
        given = requests.get(base + "/api/v1/tickets", headers={"X-Request-Id": "trace-4711"}, timeout=5)
        made = requests.post(base + "/api/v1/agents/writing/notify", json={"status": "?"}, timeout=5)
        assert given.headers["X-Request-Id"] == "trace-4711"
        made_id = made.headers["X-Request-Id"]

        def lines_for(request_id):
            found = []
            for line in server.output().splitlines():
                if line.startswith("{") and json.loads(line).get("request_id") == request_id:
                    found.append(json.loads(line))
            return found

        (first,) = wait_until(lambda: lines_for("trace-4711"), what="the first request's log line")
        (second,) = wait_until(lambda: lines_for(made_id), what="the second request's log line")
    finally:
        server.stop()
    assert first["logger"] == "svc.access" and first["message"] == "request"
    assert (first["method"], first["route"], first["status"]) == ("GET", "/api/v1/tickets", 401)
    assert (second["method"], second["route"], second["status"]) == ("POST", "/api/v1/agents/writing/notify", 401)
    assert second["level"] == "info" and second["at"].endswith("Z") and second["duration_ms"] >= 0


def test_repeated_failed_credentials_from_one_client_are_slowed_by_a_real_server(tmp_path, database_url):
    server, base = start_service(tmp_path, database_url, SVC_CI_WEBHOOK_SECRET=CI, SVC_BASIC_AUTH=f"{USER}:{PASSWORD}")
    try:
        right = (USER, PASSWORD)
        assert requests.get(base + "/api/v1/wallet", auth=right, timeout=5).status_code == 200
        for _ in range(10):
            assert requests.get(base + "/api/v1/wallet", auth=(USER, "guess"), timeout=5).status_code == 401
        locked = requests.get(base + "/api/v1/wallet", auth=right, timeout=5)
        notify = requests.post(
            base + "/api/v1/agents/writing/notify",
            json={"status": "SUCCESS"},
            headers={"X-Svc-CI-Secret": CI},
            timeout=5,
        )
    finally:
        server.stop()
    assert locked.status_code == 429  # even the right credentials wait out the minute
    assert 1 <= int(locked.headers["Retry-After"]) <= 60
    assert locked.headers["Content-Type"] == "application/problem+json"
    assert notify.status_code == 429  # the whole client address, whatever scheme it tries next


def test_no_secret_reaches_a_log_or_an_error_body(tmp_path, database_url):
    with FakeDiscord(token=DISCORD_TOKEN) as discord, FakeLinear(api_key=TRACKER_KEY) as linear:
        issue = linear.add_issue("ENG-7", linear.add_team("ENG"))
        env = {
            "SVC_CI_WEBHOOK_SECRET": CI,
            "SVC_BASIC_AUTH": f"{USER}:{PASSWORD}",
            "SVC_GITHUB_WEBHOOK_SECRET": GITHUB,
            "SVC_GITLAB_WEBHOOK_TOKEN": GITLAB,
            "SVC_TRACKER_WEBHOOK_SECRET": TRACKER,
            "SVC_TRACKER_API_URL": linear.url,
            "SVC_TRACKER_API_KEY": TRACKER_KEY,
            "DISCORD_WEBHOOK_URL": discord.url,
            # DEBUG: the HTTP client's own lines, which print request paths (a webhook's token among them).
            "SVC_LOG_LEVEL": "DEBUG",
        }
        server, base = start_service(tmp_path, database_url, **env)
        # The ops agents are left to an external cron: nothing scheduled runs here, whatever the time of day.
        jobs_env = svc_env(
            SVC_DATA_DIR=str(tmp_path / "data"), DATABASE_URL=database_url, SVC_OPS_SCHEDULER="external", **env
        )
        jobs = ServiceProcess(["jobs"], jobs_env, tmp_path / "jobs.log").start()
        bodies = []
        try:
            bodies += drive_failures(base)
            # Each outbound target fails once first, so the error paths log too.
            discord.answer_next(500, body={"message": "500: Internal Server Error", "code": 0})
            linear.rate_limit_next(retry_after=1)
            bodies += drive_successes(base, issue.id)
            wait_until(lambda: len(discord.messages) >= 2, timeout=40, what="both chat posts delivered")
            wait_until(lambda: linear.find("ENG-7").state.type == "completed", timeout=40, what="the tracker close")
        finally:
            jobs.stop()
            server.stop()

    logs = server.output() + jobs.output()
    loggers = {json.loads(line).get("logger") for line in logs.splitlines() if line.startswith("{")}
    assert "urllib3.connectionpool" in loggers and "outbox delivery" in logs  # the risky lines ran
    assert "[redacted]" in logs  # ...and the last line of defence had something to do
    for secret in (
        CI,
        PASSWORD,
        f"{USER}:{PASSWORD}",
        GITHUB,
        GITLAB,
        TRACKER,
        TRACKER_KEY,
        DISCORD_TOKEN,
        discord.url,
    ):
        assert secret not in logs, f"{secret[:12]}... appears in a log"
        assert not [b for b in bodies if secret in b], f"{secret[:12]}... appears in an answer"
    encoded = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert encoded not in logs


def test_an_install_with_only_the_shared_forge_secret_is_warned_at_every_start(tmp_path, database_url):
    shared = "forge-secret-of-an-older-install-0123"
    for start in (1, 2):
        server, base = start_service(tmp_path, database_url, SVC_FORGE_WEBHOOK_SECRET=shared)
        try:
            health = requests.get(base + "/healthz", timeout=5)
        finally:
            server.stop()
        warnings = [
            json.loads(line)
            for line in server.output().splitlines()
            if line.startswith("{") and json.loads(line).get("logger") == "svc.config"
        ]
        assert len(warnings) == 1, (start, server.output()[-2000:])
        (warning,) = warnings
        assert warning["level"] == "warning"
        for says in (
            "SVC_GITHUB_WEBHOOK_SECRET",
            "SVC_GITLAB_WEBHOOK_TOKEN",
            "plaintext",
            "unset SVC_FORGE_WEBHOOK_SECRET",
        ):
            assert says in warning["message"]
        assert shared not in server.output()
        assert (health.status_code, health.json()["status"]) == (200, "degraded")
        assert health.json()["checks"]["forge_secret"]["ok"] is False
    # Nothing was generated for GitHub or GitLab: the shared value keeps standing in for both.
    stored = (tmp_path / "data" / "credentials.env").read_text()
    assert "SVC_GITHUB_WEBHOOK_SECRET" not in stored and "SVC_GITLAB_WEBHOOK_TOKEN" not in stored


def drive_failures(base: str) -> list[str]:
    """Wrong credentials on every scheme, and right ones with bad bodies: the answers' texts."""
    answers = []
    body = raw_example("payloads/github/pull_request.synchronize.json")
    tracker_body = raw_example("payloads/linear/issue.update-state-started.json")
    tries = [
        ("POST", "/api/v1/agents/writing/notify", {"X-Svc-CI-Secret": CI[:-1]}, b'{"status": "SUCCESS"}'),
        ("GET", "/api/v1/wallet", {"Authorization": _basic(USER, PASSWORD + "x")}, None),
        ("POST", "/api/v1/webhooks/forge", github_headers("pull_request", "d-bad", body, secret=GITLAB), body),
        ("POST", "/api/v1/webhooks/forge", gitlab_headers("Merge Request Hook", "u-bad", token=GITHUB), body),
        ("POST", "/api/v1/webhooks/tracker", linear_headers("l-bad", tracker_body, secret=TRACKER[1:]), tracker_body),
        # right credentials, wrong bodies
        ("POST", "/api/v1/agents/writing/notify", {"X-Svc-CI-Secret": CI}, b'{"status": "NOPE", "secret": 1}'),
        ("POST", "/api/v1/events", {"X-Svc-CI-Secret": CI}, b'{"schema": "svc.normalized-event/v0"}'),
        ("PUT", "/api/v1/wallet", {"Authorization": _basic(USER, PASSWORD)}, b"{not json"),
    ]
    for method, path, headers, data in tries:
        headers = {"Content-Type": "application/json", **headers}
        answer = requests.request(method, base + path, headers=headers, data=data, timeout=10)
        assert 400 <= answer.status_code < 500, (path, answer.status_code)
        answers.append(answer.text)
    return answers


def drive_successes(base: str, issue_id: str) -> list[str]:
    ci = {"X-Svc-CI-Secret": CI}
    basic = (USER, PASSWORD)
    answers = []

    def ok(answer):
        assert answer.status_code < 300, (answer.request.url, answer.status_code, answer.text[:300])
        answers.append(answer.text)

    ok(requests.post(base + "/api/v1/agents/writing/notify", json={"status": "FAIL_QA"}, headers=ci, timeout=10))
    ok(requests.post(base + "/api/v1/initiatives", json={"id": "port", "name": "Port"}, auth=basic, timeout=10))
    ticket = {"key": "PORT-7", "initiative_id": "port", "title": "Login", "tracker_issue_id": issue_id}
    ok(requests.post(base + "/api/v1/tickets", json=ticket, auth=basic, timeout=10))
    ok(requests.post(base + "/api/v1/tickets/PORT-7/mark_done", auth=basic, timeout=10))
    ok(requests.post(base + "/api/v1/ops/pulse", json={"post_to_chat": "always"}, auth=basic, timeout=30))
    ok(requests.get(base + "/api/v1/agents/writing/config", headers=ci, timeout=10))
    ok(requests.get(base + "/metrics", auth=basic, timeout=10))
    body = raw_example("payloads/github/pull_request.synchronize.json")
    delivery = str(uuid.uuid4())
    github = github_headers("pull_request", delivery, body, secret=GITHUB)
    ok(requests.post(base + "/api/v1/webhooks/forge", data=body, headers=github, timeout=10))
    gitlab_body = raw_example("payloads/gitlab/merge_request.open.json")
    gitlab = gitlab_headers("Merge Request Hook", str(uuid.uuid4()), token=GITLAB)
    ok(requests.post(base + "/api/v1/webhooks/forge", data=gitlab_body, headers=gitlab, timeout=10))
    # Linear signs the time of sending: the example is stamped now, as Linear would send it.
    linear = linear_body("payloads/linear/issue.update-state-started.json", at=datetime.now(UTC))
    signed = linear_headers(str(uuid.uuid4()), linear, secret=TRACKER)
    ok(requests.post(base + "/api/v1/webhooks/tracker", data=linear, headers=signed, timeout=10))
    return answers


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
