"""The web board's browser tests: Debian's headless Chromium through Playwright, a real `svc serve` to point it
at, and axe-core (from the axe-playwright-python package, never fetched) to check each page for WCAG 2.1 A/AA."""

from __future__ import annotations

import os
import shutil
import threading

import pytest
import requests

CHROMIUM = os.environ.get("SVC_TEST_CHROMIUM", "/usr/bin/chromium")
USER, PASSWORD = "admin", "correct-horse-battery"
CI_SECRET = "browser-test-ci-secret-0123456789"
# What the probe of this machine found Chromium needs headless as root and with no outside network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def chromium_browser():
    """A generator for a module fixture: headless Chromium. Missing under CI is a failure, never a silent pass."""
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        message = f"Chromium not found at {CHROMIUM}: install Debian's chromium package (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency")
    # Chromium does not start under libfaketime (its zygote dies), so in a run with the wall clock moved
    # (scripts/shifted_clock.sh) it keeps the real clock, like a person's browser on another machine would.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("FAKETIME")}
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, env=env)
        yield browser
        browser.close()


class BoardServer:
    """The app on waitress, with what `svc serve` tells waitress (`svc.cli.server_settings`) and behind the same
    `TrustedProxies`, but in a thread of this test process: a browser test needs a real server to point Chromium
    at, not a process start of its own (the end-to-end tests start real `svc serve` processes)."""

    def __init__(self, config):
        import waitress

        from api import create_app, proxies
        from storage import db as storage_db
        from svc.cli import server_settings

        app = proxies.TrustedProxies.from_config(create_app(config), config)
        self.database = storage_db.db.obj  # what create_app bound: this server's, closed with it
        self.server = waitress.create_server(app, host="127.0.0.1", port=0, **server_settings(config))
        self.base = f"http://127.0.0.1:{self.server.effective_port}"
        self.thread = threading.Thread(target=self.server.run, name="board-server", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop serving, wait for the requests in hand, close the database; fail rather than leave a thread that
        could write into the next test's database."""
        from waitress import wasyncore

        # Everything is closed from the server's own loop (asyncore is not thread-safe), which then has nothing
        # left to watch and returns; the worker threads finish the requests in hand.
        self.server.trigger.pull_trigger(lambda: wasyncore.close_all(self.server._map))
        self.thread.join(timeout=10)
        dispatcher = self.server.task_dispatcher
        dispatcher.shutdown(timeout=10)
        self.database.close_all()
        assert not self.thread.is_alive() and not dispatcher.threads, "the board server did not stop"


def board_server(tmp_path, database_url):
    """A generator for a fixture: the board's server with an active initiative, PORT-1 in human_test, PORT-2 in
    execute, and WRITING-DAILY waiting on the agent (a BACKFILL_READY notify)."""
    from domain.config import Config

    config = Config(
        data_dir=tmp_path / "data",
        database_url=database_url,
        basic_auth=f"{USER}:{PASSWORD}",
        ci_webhook_secret=CI_SECRET,
        threads=4,
    )
    server = BoardServer(config)
    try:
        base = server.base
        with requests.Session() as api:
            api.auth = (USER, PASSWORD)
            api.post(f"{base}/api/v1/initiatives", json={"id": "port", "name": "Port", "stage": "active"}, timeout=10)
            for key, stage in [("PORT-1", "human_test"), ("PORT-2", "execute")]:
                api.post(
                    f"{base}/api/v1/tickets",
                    json={"key": key, "initiative_id": "port", "title": f"Ticket {key}", "stage": stage},
                    timeout=10,
                ).raise_for_status()
        notify = requests.post(
            f"{base}/api/v1/agents/writing/notify",
            json={"status": "BACKFILL_READY", "missing": 2},
            headers={"X-Svc-CI-Secret": CI_SECRET},
            timeout=10,
        )
        notify.raise_for_status()
        yield base
    finally:
        server.stop()


def axe_violations(page) -> list[dict]:
    """axe-core's WCAG 2.1 A and AA violations on the page as it is now, each with the elements it names."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG_TAGS}, "resultTypes": ["violations"]})
    return [
        {"rule": v["id"], "impact": v["impact"], "help": v["help"], "where": [n["target"] for n in v["nodes"][:5]]}
        for v in results.response["violations"]
    ]


WORKER, WORKER_PASSWORD = "bay-2", "worker-password-1"
# The actor of the coder events below, on the live policy's allowlist.
DISPATCHER = "linear:6d3a8c8e-3b1f-4b9e-a2c4-9f7d1e2b3c4d"


def dispatch(base: str, *, running: str, queued: tuple[str, ...]) -> dict[str, int]:
    """Live dispatch on the board at `base`: the coder rule made live (forced), a job queued for each ticket (new, in
    `queued`, of the fixture's active initiative), and the first claimed by worker `bay-2` in its bay; each ticket's
    job id."""
    from domain import accounts
    from domain.policy.document import FIRST_RULES
    from storage import db as storage_db

    with storage_db.connection():
        accounts.add(WORKER, "worker", WORKER_PASSWORD)
    rules = [{**rule, "mode": "live" if rule["name"] == "coder" else rule["mode"]} for rule in FIRST_RULES]
    document = {"allowlist": [DISPATCHER], "retry_budget": 2, "fleet_size": 3, "rules": rules}
    jobs = {}
    with requests.Session() as api:
        api.auth = (USER, PASSWORD)
        tag = api.get(f"{base}/api/v1/router/policy", timeout=10).headers["ETag"]
        api.put(
            f"{base}/api/v1/router/policy",
            json={"policy": document, "reason": "a browser test", "force": "the test says so"},
            headers={"If-Match": tag},
            timeout=10,
        ).raise_for_status()
        for key in (running, *queued):
            api.post(
                f"{base}/api/v1/tickets",
                json={"key": key, "initiative_id": "port", "title": f"Ticket {key}", "stage": "queued"},
                timeout=10,
            ).raise_for_status()
            event = {
                "schema": "svc.normalized-event/v0",
                "id": f"browser:{key}",
                "occurred_at": "2026-11-20T10:00:00Z",
                "source": "tracker",
                "transition": {"kind": "state_changed", "from": "queued", "to": "execute"},
                "subject": {"type": "ticket", "id": key, "initiative_id": "port"},
                "actor": {"kind": "human", "id": DISPATCHER, "roles": []},
                "dispatch_hints": {"eligible_for_worker": True, "blocked_reason": None, "suggested_role": None},
            }
            routed = requests.post(
                f"{base}/api/v1/events", json=event, headers={"X-Svc-CI-Secret": CI_SECRET}, timeout=10
            )
            routed.raise_for_status()
            decision = routed.json()["decision"]
            assert decision["dispatched"], decision
            jobs[key] = decision["job_id"]
    claimed = requests.post(
        f"{base}/api/v1/dispatch/claim", json={"bay": WORKER}, auth=(WORKER, WORKER_PASSWORD), timeout=10
    )
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["job"]["id"] == jobs[running]
    return jobs
