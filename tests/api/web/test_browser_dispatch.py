"""The dispatch switch in headless Chromium: an operator pauses dispatch from the decisions page with a reason, the
banner says so there at once and on another page, a pause without a reason is asked for
first, and resuming takes the banner away; the paused pages have no axe violations at either width."""

import pytest
import requests
from playwright.sync_api import expect

from browser_kit import DESKTOP, PASSWORD, PHONE, USER, axe_violations

pytestmark = [pytest.mark.browser]


def open_page(chromium, url, *, viewport=DESKTOP):
    context = chromium.new_context(http_credentials={"username": USER, "password": PASSWORD}, viewport=viewport)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.script_errors = errors
    return context, page


def switch(server) -> dict:
    answer = requests.get(server + "/api/v1/router/dispatch", auth=(USER, PASSWORD), timeout=10)
    answer.raise_for_status()
    return answer.json()


def test_an_operator_pauses_from_the_board_sees_it_everywhere_and_resumes(chromium, server):
    context, page = open_page(chromium, server + "/decisions")
    section = page.locator("#dispatch-switch")
    expect(section).to_contain_text("running")
    # No reason: the browser asks for one before anything is sent.
    page.get_by_role("button", name="Pause dispatch").click()
    assert switch(server)["paused"] is False
    page.get_by_label("Why (required").fill("the forge is down")
    page.get_by_role("button", name="Pause dispatch").click()  # sent by the script; the page shows it in place
    expect(page.locator("#dispatch-paused")).to_contain_text(f"Dispatch is paused: the forge is down (by {USER},")
    assert switch(server)["reason"] == "the forge is down"
    # Another page shows it too.
    page.goto(server + "/initiatives")
    expect(page.locator("#dispatch-paused")).to_contain_text("Dispatch is paused: the forge is down")
    page.goto(server + "/decisions")
    page.get_by_label("Why (optional").fill("forge back")
    page.get_by_role("button", name="Resume dispatch").click()
    expect(page.locator("#dispatch-switch")).to_contain_text("running")
    expect(page.locator("#dispatch-paused")).to_have_count(0)
    assert switch(server)["paused"] is False
    page.goto(server + "/")
    expect(page.locator("#dispatch-paused")).to_have_count(0)
    assert not page.script_errors
    context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_paused_board_has_no_axe_violations(chromium, server, viewport):
    requests.put(
        server + "/api/v1/router/dispatch",
        json={"paused": True, "reason": "release day: nothing goes out until the tag is cut"},
        auth=(USER, PASSWORD),
        timeout=10,
    ).raise_for_status()
    context, page = open_page(chromium, server + "/", viewport=viewport)
    found, widths = {}, {}
    for path in ("/", "/initiatives", "/decisions", "/decisions/policy", "/decisions/try"):
        page.goto(server + path)
        expect(page.locator("#dispatch-paused")).to_be_visible()
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        found[path] = axe_violations(page)
        widths[path] = page.evaluate("document.documentElement.scrollWidth")
    assert found == {path: [] for path in found}
    assert {path: width for path, width in widths.items() if width > viewport["width"]} == {}
    context.close()
