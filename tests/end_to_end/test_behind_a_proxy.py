"""A real `svc serve` behind a real forwarding proxy (`tests/servers/forwarding_proxy.py`, which appends the
client's address to `X-Forwarded-For` as nginx does). Clients are told apart by their source address: the whole
of 127.0.0.0/8 is this machine, so client A connects from 127.0.0.2 and client B from 127.0.0.3, while the proxy
reaches the service from 127.0.0.1.

Behind a trusted proxy the failed-credentials lockout counts each real client; without `SVC_TRUSTED_PROXY` (or
from a peer that is not the trusted proxy) no forwarding header is believed, so inventing one escapes nothing.
"""

import base64
import http.client
import json

import pytest

from conftest import BASIC, CI_SECRET
from processes import ServiceProcess, free_port, start_service, svc_env, wait_until
from servers.forwarding_proxy import ForwardingProxy

pytestmark = pytest.mark.process

CLIENT_A, CLIENT_B, CLIENT_C = "127.0.0.2", "127.0.0.3", "127.0.0.4"
WRONG = "Basic " + base64.b64encode(b"admin:not-the-password").decode()
RIGHT = "Basic " + base64.b64encode(BASIC.encode()).decode()


def get(port: int, path: str, *, source: str, headers: dict[str, str]) -> http.client.HTTPResponse:
    """One request from `source` (a loopback address) to 127.0.0.1:`port`, on its own connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    try:
        connection.request("GET", path, headers=headers)
        answer = connection.getresponse()
        answer.read()
        return answer
    finally:
        connection.close()


def serve(tmp_path, database_url, **env: str):
    return start_service(tmp_path, database_url, SVC_CI_WEBHOOK_SECRET=CI_SECRET, SVC_BASIC_AUTH=BASIC, **env)


def access_lines(server: ServiceProcess, route: str) -> list[dict]:
    lines = [json.loads(line) for line in server.output().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("logger") == "svc.access" and line.get("route") == route]


def test_behind_a_trusted_proxy_one_clients_failures_do_not_lock_out_another(tmp_path, database_url):
    server, base = serve(tmp_path, database_url, SVC_TRUSTED_PROXY="127.0.0.1")
    port = int(base.rsplit(":", 1)[1])
    try:
        with ForwardingProxy("127.0.0.1", port) as proxy:
            # A also invents an X-Forwarded-For each time; the proxy appends A's real address after it.
            for i in range(10):
                spoofed = {"Authorization": WRONG, "X-Forwarded-For": f"203.0.113.{i}"}
                assert get(proxy.port, "/api/v1/wallet", source=CLIENT_A, headers=spoofed).status == 401
            locked = get(proxy.port, "/api/v1/wallet", source=CLIENT_A, headers={"Authorization": RIGHT})
            other_wrong = get(proxy.port, "/api/v1/wallet", source=CLIENT_B, headers={"Authorization": WRONG})
            other_right = get(proxy.port, "/api/v1/wallet", source=CLIENT_B, headers={"Authorization": RIGHT})
            told = list(proxy.forwarded)
        lines = wait_until(lambda: (found := access_lines(server, "/api/v1/wallet")) and len(found) >= 13 and found)
    finally:
        server.stop()
    assert locked.status == 429 and 1 <= int(locked.getheader("Retry-After")) <= 60
    assert other_wrong.status == 401  # B's own first failure, not A's lockout
    assert other_right.status == 200
    assert told[0] == f"203.0.113.0, {CLIENT_A}"  # what A invented came first; the proxy's entry last
    assert [(line["client"], line["status"]) for line in lines] == [(CLIENT_A, 401)] * 10 + [
        (CLIENT_A, 429),
        (CLIENT_B, 401),
        (CLIENT_B, 200),
    ]


def test_a_peer_that_is_not_the_trusted_proxy_is_not_believed(tmp_path, database_url):
    # Trusting 127.0.0.1 (the proxy) says nothing about 127.0.0.4 connecting on its own.
    server, base = serve(tmp_path, database_url, SVC_TRUSTED_PROXY="127.0.0.1/32, 10.0.0.0/8")
    port = int(base.rsplit(":", 1)[1])
    try:
        for i in range(10):
            spoofed = {"Authorization": WRONG, "X-Forwarded-For": f"198.51.100.{i}"}
            assert get(port, "/api/v1/wallet", source=CLIENT_C, headers=spoofed).status == 401
        escape = {"Authorization": RIGHT, "X-Forwarded-For": CLIENT_B, "Forwarded": f"for={CLIENT_B}"}
        still_locked = get(port, "/api/v1/wallet", source=CLIENT_C, headers=escape)
        lines = wait_until(lambda: (found := access_lines(server, "/api/v1/wallet")) and len(found) >= 11 and found)
    finally:
        server.stop()
    assert still_locked.status == 429
    assert {line["client"] for line in lines} == {CLIENT_C}


def test_without_a_trusted_proxy_a_spoofed_forwarded_for_does_not_escape_the_lockout(tmp_path, database_url):
    server, base = serve(tmp_path, database_url)
    port = int(base.rsplit(":", 1)[1])
    try:
        for i in range(10):
            spoofed = {"Authorization": WRONG, "X-Forwarded-For": f"192.0.2.{i}", "Forwarded": f"for=192.0.2.{i}"}
            assert get(port, "/api/v1/wallet", source=CLIENT_A, headers=spoofed).status == 401
        escape = {"Authorization": RIGHT, "X-Forwarded-For": CLIENT_B, "X-Real-IP": CLIENT_B}
        still_locked = get(port, "/api/v1/wallet", source=CLIENT_A, headers=escape)
        # Through a proxy the service was not told to trust, every client is the proxy: one bucket for all.
        with ForwardingProxy("127.0.0.1", port) as proxy:
            via_proxy = get(proxy.port, "/api/v1/wallet", source=CLIENT_B, headers={"Authorization": RIGHT})
        lines = wait_until(lambda: (found := access_lines(server, "/api/v1/wallet")) and len(found) >= 12 and found)
    finally:
        server.stop()
    assert still_locked.status == 429
    assert via_proxy.status == 200
    assert [line["client"] for line in lines] == [CLIENT_A] * 11 + ["127.0.0.1"]
    assert "forwarding headers are never believed" in server.output()


def test_a_bad_trusted_proxy_setting_stops_start_up(tmp_path, database_url):
    env = svc_env(
        SVC_DATA_DIR=str(tmp_path / "data"),
        DATABASE_URL=database_url,
        SVC_PORT=str(free_port()),
        SVC_TRUSTED_PROXY="nginx",
        SVC_TRUSTED_PROXY_HEADERS="x-real-ip",
    )
    server = ServiceProcess(["serve"], env, tmp_path / "serve.log").start()
    assert server.proc.wait(timeout=30) == 2
    server.stop()
    output = server.output()
    assert "SVC_TRUSTED_PROXY: expected IP addresses or networks" in output and "'nginx'" in output
    assert "SVC_TRUSTED_PROXY_HEADERS: unknown header x-real-ip" in output
