"""Slow clients against a real `svc serve`: one address dribbling its requests a byte at a time cannot hold the
door. It holds at most SVC_MAX_CONNECTIONS_PER_CLIENT connections (one more is answered 429 at once); a request
whose headers take longer than SVC_REQUEST_HEADER_TIMEOUT, or whose body arrives slower than
SVC_REQUEST_BODY_MIN_RATE, is answered 408 and closed. Everyone else is served meanwhile.

The requests of the others carry a timeout as every client's do; it only bounds how long a broken server would
hold the test (before these limits, the same attack held the service for minutes)."""

from __future__ import annotations

import json

import pytest
import requests
from slow_clients import Dribble, read_until_closed, slow_body

from processes import start_service, wait_until

pytestmark = pytest.mark.process

SECRET = "slow-clients-ci-secret-0123456789"


def test_150_dribbling_connections_from_one_address_leave_everyone_else_served(tmp_path, database_url):
    server, base = start_service(tmp_path, database_url, SVC_CI_WEBHOOK_SECRET=SECRET, SVC_REQUEST_HEADER_TIMEOUT="2")
    port = int(base.rsplit(":", 1)[1])
    attack = Dribble(port, source="127.0.0.2", count=150)
    try:
        health = requests.get(base + "/healthz", timeout=10)
        notify = requests.post(
            base + "/api/v1/agents/writing/notify",
            json={"status": "FAIL_QA"},
            headers={"X-Svc-CI-Secret": SECRET},
            timeout=10,
        )
        assert health.status_code == 200
        assert notify.status_code == 200, notify.text
        # The attacker's connections are all answered and closed: over the cap at once (429), the ones it was
        # allowed when their headers ran out of time (408), however many bytes they kept sending.
        wait_until(attack.all_closed, timeout=60, what="every dribbling connection closed by the server")
        statuses = attack.statuses()
    finally:
        attack.stop()
        server.stop()
    assert statuses.count("429") == 150 - 20
    assert statuses.count("408") == 20
    refusals = [
        json.loads(line)
        for line in server.output().splitlines()
        if line.startswith("{") and json.loads(line).get("logger") == "svc.server"
    ]
    assert refusals and refusals[0]["addresses"] == ["127.0.0.2"]  # summed up, not a line per connection
    assert len(refusals) < 10


def test_a_body_slower_than_the_minimum_rate_is_answered_408(tmp_path, database_url):
    server, base = start_service(
        tmp_path,
        database_url,
        SVC_CI_WEBHOOK_SECRET=SECRET,
        SVC_REQUEST_HEADER_TIMEOUT="1",
        SVC_REQUEST_BODY_MIN_RATE="100",
    )
    port = int(base.rsplit(":", 1)[1])
    try:
        answer = read_until_closed(slow_body(port), dribble=b" ", every=0.2)
        after = requests.get(base + "/healthz", timeout=10)
    finally:
        server.stop()
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"body arrived too slowly" in answer
    assert after.status_code == 200
