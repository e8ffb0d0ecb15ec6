"""`svc serve` behind Debian's nginx with the configuration docs/operating.md gives: the slow-client attack that
`test_slow_clients.py` sends to the service directly is held by nginx and never reaches the service, while
everyone else is served through it; the service believes nginx's X-Forwarded-For (SVC_TRUSTED_PROXY), so its log
names each client: the real client connects from 127.0.0.3, an address neither nginx nor the service has, so only a
believed X-Forwarded-For can name it. And a person changes something on the web board through that nginx on a port
of its own (not 443): the Host nginx passes on keeps the port, so the board's same-site check lets it through."""

from __future__ import annotations

import json

import pytest
import requests
from nginx_kit import Nginx
from playwright.sync_api import expect
from requests.adapters import HTTPAdapter
from slow_clients import Dribble

from browser_kit import PASSWORD, USER
from processes import start_service

pytestmark = pytest.mark.process

SECRET = "nginx-ci-secret-0123456789abcdef"
CLIENT = "127.0.0.3"  # the real client's address; nginx connects to the service from 127.0.0.1


class _FromAddress(HTTPAdapter):
    """Connections that leave from `source` (a loopback address other than 127.0.0.1)."""

    def __init__(self, source: str):
        self.source = source
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self.source, 0)
        super().init_poolmanager(*args, **kwargs)


def _client_at(source: str) -> requests.Session:
    session = requests.Session()
    session.mount("http://", _FromAddress(source))
    return session


def test_the_documented_nginx_holds_a_slow_client_attack_away_from_the_service(tmp_path, database_url):
    server, base = start_service(tmp_path, database_url, SVC_CI_WEBHOOK_SECRET=SECRET, SVC_TRUSTED_PROXY="127.0.0.1")
    proxy = attack = None
    try:
        proxy = Nginx(tmp_path / "nginx", upstream_port=int(base.rsplit(":", 1)[1]))
        attack = Dribble(proxy.port, source="127.0.0.2", count=150)
        client = _client_at(CLIENT)
        health = client.get(proxy.base + "/healthz", timeout=10)
        notify = client.post(
            proxy.base + "/api/v1/agents/writing/notify",
            json={"status": "FAIL_QA"},
            headers={"X-Svc-CI-Secret": SECRET},
            timeout=10,
        )
        assert health.status_code == 200, proxy.errors()
        assert notify.status_code == 200, notify.text
    finally:
        if attack is not None:
            attack.stop()
        if proxy is not None:
            proxy.stop()
        server.stop()

    lines = [json.loads(line) for line in server.output().splitlines() if line.startswith("{")]
    requests_seen = [line for line in lines if line.get("logger") == "svc.access"]
    # The service saw nginx's start-up probe (from 127.0.0.1) and the two requests, each from its real client, named
    # by nginx's X-Forwarded-For: without SVC_TRUSTED_PROXY they would be nginx's 127.0.0.1. Nothing of the attack.
    assert [(line["route"], line["client"]) for line in requests_seen][-2:] == [
        ("/healthz", CLIENT),
        ("/api/v1/agents/writing/notify", CLIENT),
    ]
    assert {line["client"] for line in requests_seen[:-2]} == {"127.0.0.1"}
    assert not [line for line in lines if line.get("logger") == "svc.server"]  # no connection it had to refuse


@pytest.mark.browser
def test_a_board_change_goes_through_the_documented_nginx_on_a_port_other_than_443(tmp_path, database_url, chromium):
    server, base = start_service(
        tmp_path, database_url, SVC_BASIC_AUTH=f"{USER}:{PASSWORD}", SVC_TRUSTED_PROXY="127.0.0.1"
    )
    proxy = context = None
    try:
        proxy = Nginx(tmp_path / "nginx", upstream_port=int(base.rsplit(":", 1)[1]))
        assert proxy.port not in (80, 443)  # the browser's Origin and Host carry the port
        context = chromium.new_context(http_credentials={"username": USER, "password": PASSWORD})
        page = context.new_page()
        page.goto(proxy.base + "/")
        automation = page.get_by_label("Writing automation (scheduled catch-up)")
        assert automation.is_checked()
        with page.expect_response(lambda r: r.url.endswith("/automation") and r.request.method == "POST") as sent:
            automation.click()
        assert sent.value.status == 200, sent.value.text()  # a 403 says which Origin and Host it compared
        expect(page.locator("#writing-automation-state")).to_have_text("off")
        # The change is real: the service recorded it, by the person signed in through nginx.
        setting = requests.get(proxy.base + "/api/v1/agents/writing/automation", auth=(USER, PASSWORD), timeout=10)
        assert (setting.json()["enabled"], setting.json()["updated_by"]) == (False, USER), proxy.errors()
    finally:
        if context is not None:
            context.close()
        if proxy is not None:
            proxy.stop()
        server.stop()
