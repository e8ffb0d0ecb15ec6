"""The web board's browser tests: Debian's headless Chromium through Playwright, a real `svc serve` to point it
at, and axe-core (from the axe-playwright-python package, never fetched) to check each page for WCAG 2.1 A/AA."""

from __future__ import annotations

import os
import shutil

import pytest
import requests

from processes import start_service

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


def board_server(tmp_path, database_url):
    """A generator for a fixture: `svc serve` with an active initiative, PORT-1 in human_test, PORT-2 in execute,
    and WRITING-DAILY waiting on the agent (a BACKFILL_READY notify)."""
    process, base = start_service(
        tmp_path, database_url, SVC_BASIC_AUTH=f"{USER}:{PASSWORD}", SVC_CI_WEBHOOK_SECRET=CI_SECRET
    )
    api = requests.Session()
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
    process.stop()


def axe_violations(page) -> list[dict]:
    """axe-core's WCAG 2.1 A and AA violations on the page as it is now, each with the elements it names."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG_TAGS}, "resultTypes": ["violations"]})
    return [
        {"rule": v["id"], "impact": v["impact"], "help": v["help"], "where": [n["target"] for n in v["nodes"][:5]]}
        for v in results.response["violations"]
    ]
