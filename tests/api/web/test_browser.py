"""The web board in headless Chromium against a real `svc serve`: sign in, toggle writing automation and watch
WRITING-DAILY leave and rejoin the Needs-you list without a reload, open a ticket page, mark a ticket done."""

import os
import shutil

import pytest
import requests

from processes import start_service

pytestmark = [pytest.mark.browser, pytest.mark.process]

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


@pytest.fixture(scope="module")
def chromium():
    """Headless Chromium through Playwright. Missing under CI is a failure, never a silent pass."""
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        message = f"Chromium not found at {CHROMIUM}: install Debian's chromium package (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def server(tmp_path, database_url):
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


def needs_you_keys(page) -> list[str]:
    return page.locator("#needs-you li.needs-item").evaluate_all("items => items.map(i => i.dataset.key)")


def test_toggling_automation_hides_and_restores_the_writing_ticket(chromium, server):
    context = chromium.new_context(http_credentials={"username": USER, "password": PASSWORD})
    page = context.new_page()
    page.goto(server + "/")
    assert sorted(needs_you_keys(page)) == ["PORT-1", "WRITING-DAILY"]
    assert "Run the backfill writing workflow in the editor agent" in page.locator("#needs-you").inner_text()

    checkbox = page.get_by_label("Writing automation (scheduled catch-up)")
    assert checkbox.is_checked()
    checkbox.uncheck()
    page.wait_for_function("() => !document.querySelector('#needs-you [data-key=\"WRITING-DAILY\"]')")
    assert needs_you_keys(page) == ["PORT-1"]
    assert page.locator("#writing-automation-state").inner_text() == "off"
    # The change is real, not only on the page: the API agrees.
    setting = requests.get(server + "/api/v1/agents/writing/automation", auth=(USER, PASSWORD), timeout=10).json()
    assert setting["enabled"] is False

    checkbox.check()
    page.wait_for_function("() => !!document.querySelector('#needs-you [data-key=\"WRITING-DAILY\"]')")
    assert sorted(needs_you_keys(page)) == ["PORT-1", "WRITING-DAILY"]

    page.reload()  # and it stays so after a reload
    assert page.get_by_label("Writing automation (scheduled catch-up)").is_checked()
    context.close()


def test_a_ticket_page_opens_from_the_board_and_mark_done_asks_first(chromium, server):
    context = chromium.new_context(http_credentials={"username": USER, "password": PASSWORD})
    page = context.new_page()
    page.goto(server + "/")
    page.locator('.column[data-stage="execute"] a.key', has_text="PORT-2").click()
    page.wait_for_url(server + "/tickets/PORT-2")
    assert page.locator("h2").inner_text().startswith("PORT-2")
    assert "created in execute" in page.locator(".timeline").inner_text()

    page.once("dialog", lambda dialog: dialog.dismiss())  # first say no: nothing happens
    page.get_by_role("button", name="Mark PORT-2 done").click()
    assert requests.get(server + "/api/v1/tickets/PORT-2", auth=(USER, PASSWORD), timeout=10).json()["stage"] == (
        "execute"
    )
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.get_by_role("button", name="Mark PORT-2 done").click()
    assert page.locator(".facts").inner_text().count("done") >= 1
    assert requests.get(server + "/api/v1/tickets/PORT-2", auth=(USER, PASSWORD), timeout=10).json()["stage"] == "done"
    context.close()


def test_the_board_works_at_phone_width_with_the_keyboard(chromium, server):
    context = chromium.new_context(
        http_credentials={"username": USER, "password": PASSWORD}, viewport={"width": 390, "height": 844}
    )
    page = context.new_page()
    page.goto(server + "/")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways at phone width ({width}px)"
    # Tab to the automation checkbox and flip it with the space bar.
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "writing-automation":
            break
    else:
        pytest.fail("the automation checkbox is not reachable with the keyboard")
    page.keyboard.press("Space")
    page.wait_for_function("() => !document.querySelector('#needs-you [data-key=\"WRITING-DAILY\"]')")
    context.close()
