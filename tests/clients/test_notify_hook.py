"""The notify hook as a library, against a local stand-in for the service that can be slow or fail."""

import ast
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from clients import notify_hook
from clients.notify_hook import REFUSED, UNREACHABLE, USAGE, HookError

from processes import free_port

SECRET = "hook-test-secret-0123456789"
ANSWER = {"ticket": {"key": "WRITING-DAILY", "stage": "execute", "waiting_on": "agent"}, "chat": "queued"}


class StandIn:
    """Answers each request with the next scripted (status, body, headers, delay), then 200 with ANSWER."""

    def __init__(self):
        self.script = []
        self.seen = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stand_in.seen.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": raw}
                )
                status, body, headers, delay = stand_in.script.pop(0) if stand_in.script else (200, ANSWER, {}, 0)
                time.sleep(delay)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def then(self, status, body=None, headers=None, delay=0.0):
        self.script.append((status, body or {"title": "x"}, headers or {}, delay))
        return self


@pytest.fixture
def service():
    stand_in = StandIn()
    yield stand_in
    stand_in.server.shutdown()
    stand_in.server.server_close()


def env(service, **extra):
    return {"SVC_CI_WEBHOOK_SECRET": SECRET, "SVC_BASE_URL": service.base, **extra}


def send(service, status="BACKFILL_READY", **kwargs):
    kwargs.setdefault("environ", env(service))
    kwargs.setdefault("backoff", 0.01)
    return notify_hook.notify(status, **kwargs)


def test_a_report_is_posted_with_the_secret_and_a_key(service):
    answer = send(service, missing=2, items=[{"date": "2026-11-19", "slug": "a"}])
    assert answer == ANSWER
    (request,) = service.seen
    assert request["method"] == "POST" and request["path"] == "/api/v1/agents/writing/notify"
    assert request["headers"]["X-Svc-CI-Secret"] == SECRET
    assert request["headers"]["Idempotency-Key"].startswith("notify-")
    assert json.loads(request["body"]) == {
        "status": "BACKFILL_READY",
        "missing": 2,
        "items": [{"date": "2026-11-19", "slug": "a"}],
    }


def test_transient_failures_are_retried_with_the_same_key(service):
    service.then(503).then(502).then(429, headers={"Retry-After": "0"})
    assert send(service) == ANSWER
    keys = {r["headers"]["Idempotency-Key"] for r in service.seen}
    assert len(service.seen) == 4 and len(keys) == 1


def test_an_outage_longer_than_a_few_tries_is_ridden_out_as_retry_after_asks(service):
    # A database outage: 503 with Retry-After, more times than a fixed count of tries would have allowed.
    for _ in range(6):
        service.then(503, {"type": "https://svc.invalid/problems/database-unavailable"}, {"Retry-After": "0"})
    assert send(service) == ANSWER
    assert len(service.seen) == 7
    assert len({r["headers"]["Idempotency-Key"] for r in service.seen}) == 1


def test_a_retry_after_past_the_deadline_gives_up_at_once_saying_so(service):
    service.then(503, headers={"Retry-After": "3600"})
    with pytest.raises(HookError) as failed:
        send(service, deadline=30)
    assert failed.value.code == UNREACHABLE and "past the 30s deadline" in str(failed.value)
    assert len(service.seen) == 1


def test_retries_are_bounded_and_then_the_exit_code_says_try_later(service):
    service.then(500).then(500).then(500)
    with pytest.raises(HookError) as failed:
        send(service, attempts=3)
    assert failed.value.code == UNREACHABLE and "500" in str(failed.value)
    assert len(service.seen) == 3


def test_a_slow_service_times_out_and_is_retried(service):
    service.then(200, ANSWER, delay=0.5)
    assert send(service, timeout=(1.0, 0.2)) == ANSWER
    assert len(service.seen) == 2


def test_an_unreachable_service_is_exit_code_3():
    environ = {"SVC_CI_WEBHOOK_SECRET": SECRET, "SVC_BASE_URL": f"http://127.0.0.1:{free_port()}"}
    with pytest.raises(HookError) as failed:
        notify_hook.notify("SUCCESS", environ=environ, attempts=2, backoff=0.01)
    assert failed.value.code == UNREACHABLE and "could not connect" in str(failed.value)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (401, {"title": "Unauthorized"}, "SVC_CI_WEBHOOK_SECRET"),
        (422, {"detail": "bad", "errors": [{"path": "/items/0/date", "message": "is not a 'date'"}]}, "/items/0/date"),
        (404, {"title": "Not Found"}, "SVC_WRITING_WEBHOOK_URL"),
    ],
)
def test_a_refusal_is_not_retried_and_says_what_to_fix(service, status, body, expected):
    service.then(status, body)
    with pytest.raises(HookError) as refused:
        send(service)
    assert refused.value.code == REFUSED and expected in str(refused.value)
    assert len(service.seen) == 1


@pytest.mark.parametrize("switch", [{"SVC_WRITING_NOTIFY": "0"}, {"WRITING_AUTOMATION": "0"}])
def test_the_hook_can_be_switched_off(service, switch, capsys):
    assert send(service, environ=env(service, **switch)) is None
    assert service.seen == []
    assert "switched off" in capsys.readouterr().err


def test_the_notify_address_can_be_overridden(service):
    environ = env(service, SVC_BASE_URL="http://127.0.0.1:9", SVC_WRITING_WEBHOOK_URL=service.base + "/hooks/notify")
    send(service, environ=environ)
    assert service.seen[0]["path"] == "/hooks/notify"


def test_the_config_is_read_next_to_the_notify_address(service):
    service.then(200, {"automation_enabled": False})
    assert notify_hook.fetch_config(environ=env(service)) == {"automation_enabled": False}
    assert service.seen[0]["method"] == "GET" and service.seen[0]["path"] == "/api/v1/agents/writing/config"


@pytest.mark.parametrize(
    ("environ", "status", "says"),
    [
        ({"SVC_BASE_URL": "http://127.0.0.1:9"}, "SUCCESS", "SVC_CI_WEBHOOK_SECRET is not set"),
        ({"SVC_CI_WEBHOOK_SECRET": SECRET, "SVC_BASE_URL": "http://svc.example.org"}, "SUCCESS", "plain http"),
        ({"SVC_CI_WEBHOOK_SECRET": SECRET, "SVC_BASE_URL": "ftp://127.0.0.1"}, "SUCCESS", "not an http(s) URL"),
        ({"SVC_CI_WEBHOOK_SECRET": SECRET}, "DONE", "unknown status"),
        ({"SVC_CI_WEBHOOK_SECRET": SECRET}, "FAIL_qa", "unknown status"),
    ],
)
def test_bad_configuration_is_exit_code_2_before_anything_is_sent(environ, status, says):
    with pytest.raises(HookError) as bad:
        notify_hook.notify(status, environ=environ, attempts=1)
    assert bad.value.code == USAGE and says in str(bad.value)


def test_the_hook_depends_on_nothing_but_the_standard_library_and_requests():
    tree = ast.parse(Path(notify_hook.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert imported - sys.stdlib_module_names == {"requests"}


def test_a_redirect_is_not_followed_so_the_secret_goes_nowhere_else(service):
    elsewhere = StandIn()
    try:
        service.then(307, headers={"Location": elsewhere.base + "/collect"})
        with pytest.raises(HookError):
            send(service, attempts=1)
        assert elsewhere.seen == []  # the secret never reached the other host
    finally:
        elsewhere.server.shutdown()
        elsewhere.server.server_close()
