"""Hostile input against a real `svc serve` (waitress in front of the app): each gets a 4xx and changes nothing.

Two limits stand in front of a body. The app's (`SVC_MAX_BODY_BYTES`, 4 KiB here) answers 413 problem+json,
whether the body declares its length or comes chunked; waitress's own (`max(8 x the app's, 16 MiB)`) sits far
above it and answers a plain-text 413 only to what the app would never have read anyway. Headers are
waitress's alone: more than 64 KiB of them is a plain-text 431 before the app sees the request.
"""

import contextlib
import json
import socket

import pytest
import requests

import contracts

from conftest import BASIC, CI_SECRET
from processes import start_service

pytestmark = pytest.mark.process

NOTIFY = "/api/v1/agents/writing/notify"
APP_LIMIT = 4096
WAITRESS_LIMIT = 16 * 1024 * 1024


@pytest.fixture(scope="module")
def service(tmp_path_factory, module_database_url):
    tmp = tmp_path_factory.mktemp("hostile")
    url = module_database_url
    env = {"SVC_CI_WEBHOOK_SECRET": CI_SECRET, "SVC_BASIC_AUTH": BASIC, "SVC_MAX_BODY_BYTES": str(APP_LIMIT)}
    server, base = start_service(tmp, url, **env)
    yield base
    server.stop()


def exchange(base: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read the answer until the server closes: (status, headers, body)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.sendall(request)  # the server may answer and close before it has read everything
        data = b""
        while True:
            try:
                chunk = conn.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def post(path: str, body: bytes, *, extra: bytes = b"", length: bool = True, content_type="application/json"):
    head = f"POST {path} HTTP/1.1\r\nHost: svc\r\nX-Svc-CI-Secret: {CI_SECRET}\r\nConnection: close\r\n".encode()
    head += f"Content-Type: {content_type}\r\n".encode() + extra
    if length:
        return head + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    return head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def assert_problem(status: int, headers: dict, body: bytes, expected: int) -> dict:
    assert status == expected, body[:300]
    assert headers["content-type"] == "application/problem+json"
    problem = json.loads(body)
    contracts.check("problem.json", problem)
    assert problem["status"] == expected
    return problem


def assert_nothing_recorded(base: str) -> None:
    ci = {"X-Svc-CI-Secret": CI_SECRET}
    assert requests.get(base + "/api/v1/agents/runs", headers=ci, timeout=10).json()["runs"] == []
    assert requests.get(base + "/api/v1/tickets", auth=tuple(BASIC.split(":")), timeout=10).json()["tickets"] == []


def valid_report(size: int = 0) -> bytes:
    return json.dumps({"status": "FAIL_QA", "items": [{"title": "x" * size}]}).encode()


def test_a_body_over_the_app_limit_but_under_waitress_is_a_problem_json_413(service):
    body = valid_report(64 * 1024)
    assert APP_LIMIT < len(body) < WAITRESS_LIMIT
    problem = assert_problem(*exchange(service, post(NOTIFY, body)), 413)
    assert str(APP_LIMIT) in problem["detail"]
    assert_nothing_recorded(service)


def test_a_chunked_body_without_a_length_over_the_app_limit_is_a_problem_json_413(service):
    assert_problem(*exchange(service, post(NOTIFY, valid_report(64 * 1024), length=False)), 413)
    assert_nothing_recorded(service)


def test_a_length_over_waitress_limit_is_refused_by_waitress_before_the_body_is_read(service):
    # Only the head is sent: waitress answers from the declared length alone, in plain text.
    head = post(NOTIFY, b"").replace(b"Content-Length: 0", f"Content-Length: {WAITRESS_LIMIT + 1}".encode())
    status, headers, body = exchange(service, head)
    assert status == 413
    assert headers["content-type"].startswith("text/plain")
    assert b"exceeds max_body" in body
    assert_nothing_recorded(service)


def test_deep_json_is_400(service):
    depth = (APP_LIMIT - 100) // 2
    problem = assert_problem(*exchange(service, post(NOTIFY, b"[" * depth + b"]" * depth)), 400)
    assert "nested deeper" in problem["detail"]
    assert_nothing_recorded(service)


def test_more_than_400_items_is_422_naming_the_array(service):
    body = json.dumps({"status": "BACKFILL_READY", "items": [{}] * 401}).encode()
    assert len(body) < APP_LIMIT
    problem = assert_problem(*exchange(service, post(NOTIFY, body)), 422)
    assert [e["path"] for e in problem["errors"]] == ["/items"]
    assert_nothing_recorded(service)


def test_invalid_utf8_is_400(service):
    problem = assert_problem(*exchange(service, post(NOTIFY, b'{"status": "FAIL_\xff\xfe"}')), 400)
    assert "UTF-8" in problem["detail"]
    assert_nothing_recorded(service)


@pytest.mark.parametrize(
    "flood",
    [
        b"".join(b"X-Flood-%d: %s\r\n" % (i, b"v" * 60) for i in range(1500)),  # many headers, ~100 KiB
        b"X-Huge: " + b"v" * (70 * 1024) + b"\r\n",  # one huge value
    ],
    ids=["many-headers", "huge-value"],
)
def test_header_floods_over_64_kib_are_refused_by_waitress_with_431(service, flood):
    status, headers, body = exchange(service, post(NOTIFY, valid_report(), extra=flood))
    assert status == 431
    assert headers["content-type"].startswith("text/plain")
    assert b"exceeds max_header" in body
    assert_nothing_recorded(service)


def test_hundreds_of_headers_under_the_limit_reach_the_app_and_are_answered_as_usual(service):
    # 300 junk headers (about 10 KiB) are a request like any other: here, one without credentials.
    flood = b"".join(b"X-Flood-%d: %s\r\n" % (i, b"v" * 20) for i in range(300))
    request = b"POST " + NOTIFY.encode() + b" HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n" + flood
    request += b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    assert_problem(*exchange(service, request), 401)
    assert_nothing_recorded(service)
