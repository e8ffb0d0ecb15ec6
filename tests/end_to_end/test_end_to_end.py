"""`svc serve` as a real process: first start generates credentials, then HTTP works end to end."""

import pytest
import requests

from domain.config import read_credentials_file

from processes import ServiceProcess, free_port, svc_env

pytestmark = pytest.mark.process


def test_svc_serve_starts_generates_credentials_and_serves(tmp_path, database_url):
    port = free_port()
    data_dir = tmp_path / "data"
    env = svc_env(SVC_DATA_DIR=str(data_dir), SVC_PORT=str(port), DATABASE_URL=database_url)
    server = ServiceProcess(["serve"], env, tmp_path / "serve.log").start()
    base = f"http://127.0.0.1:{port}"
    try:
        server.wait_healthy(base)
        credentials = read_credentials_file(data_dir / "credentials.env")
        assert str(data_dir / "credentials.env") in server.output()
        user, password = credentials["SVC_BASIC_AUTH"].split(":", 1)

        assert requests.get(base + "/api/v1/tickets", timeout=5).status_code == 401
        session = requests.Session()
        session.auth = (user, password)
        assert session.post(base + "/api/v1/initiatives", json={"id": "port", "name": "Port"}, timeout=5).ok
        created = session.post(
            base + "/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "port", "title": "First"}, timeout=5
        )
        assert created.status_code == 201
        moved = session.post(base + "/api/v1/tickets/PORT-1/move", json={"to": "queued"}, timeout=5)
        assert moved.json()["stage"] == "queued"
        oversized = session.post(
            base + "/api/v1/tickets",
            data=b"x" * (2 * 1024 * 1024),
            headers={"Content-Type": "application/json"},
            timeout=10,
        )
        assert oversized.status_code == 413
        assert oversized.headers["Content-Type"] == "application/problem+json"
        # the secrets are nowhere in what the server printed, bar the path of the file that holds them
        assert password not in server.output()
        assert credentials["SVC_CI_WEBHOOK_SECRET"] not in server.output()
    finally:
        server.stop()


def test_a_bad_setting_stops_start_up_naming_the_variable(tmp_path):
    env = svc_env(SVC_DATA_DIR=str(tmp_path), SVC_PORT="not-a-port")
    server = ServiceProcess(["serve"], env, tmp_path / "serve.log").start()
    assert server.proc.wait(timeout=30) == 2
    assert "SVC_PORT" in server.output()
    server.stop()
