"""Is the router right? in headless Chromium: the scorecard on the decisions page and the decisions behind a
number, Try a policy with its flips, and a flipped decision's own page, at a laptop's and a phone's width, with no
axe violations and nothing scrolling sideways."""

from datetime import UTC, datetime

import pytest
import requests

from browser_kit import CI_SECRET, DESKTOP, PASSWORD, PHONE, USER, axe_violations
from router_kit import envelope

pytestmark = [pytest.mark.browser]

MONA = "github:mona"  # not on this server's allowlist (it has none): every event of hers is blocked


def post(server, document):
    answer = requests.post(server + "/api/v1/events", json=document, headers={"X-Svc-CI-Secret": CI_SECRET}, timeout=10)
    assert answer.status_code == 202, answer.text
    return answer.json()["decision"]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_scorecard_and_try_a_policy_in_the_browser(chromium, server, viewport):
    blocked = [
        post(server, envelope("state_changed", key, actor=MONA, initiative="port", at=datetime.now(UTC)))
        for key in ("PORT-1", "PORT-2")
    ]
    # The team went ahead with PORT-2 anyway: a merge request is opened for it.
    post(server, envelope("opened", "PORT-2", actor=MONA, initiative="port", at=datetime.now(UTC)))
    context = chromium.new_context(http_credentials={"username": USER, "password": PASSWORD}, viewport=viewport)
    page = context.new_page()
    found, widths = {}, {}

    def check(name):
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        found[name] = axe_violations(page)
        widths[name] = page.evaluate("document.documentElement.scrollWidth")

    page.goto(server + "/decisions")
    scorecard = page.get_by_role("region", name="Scorecard per gate")
    expect_row = scorecard.locator('tr[data-gate="authorization"]')
    assert expect_row.locator("td").nth(1).inner_text() == "1"  # overridden: PORT-2
    check("/decisions")
    expect_row.get_by_role("link", name="1 overridden decisions blocked by authorization").click()
    page.wait_for_url("**/decisions/behind?*")
    assert page.locator("li.decision").evaluate_all("l => l.map(i => i.dataset.subject)") == ["PORT-2"]
    check("/decisions/behind")

    page.goto(server + "/decisions")
    page.get_by_role("link", name="Try a policy").click()
    page.wait_for_url("**/decisions/try")
    page.get_by_label("Allowlist").fill(MONA)
    with page.expect_navigation():
        page.get_by_role("button", name="Try it").click()
    assert page.get_by_role("heading", name="2 of 3 decisions would flip").is_visible()
    flips = page.get_by_role("list", name="Flipped decisions, oldest first").get_by_role("listitem")
    assert flips.count() == 2
    check("/decisions/try")
    with page.expect_navigation():
        flips.first.get_by_role("link").click()
    # PORT-1 is at the human gate on this board, so it stays blocked: the first flip is PORT-2's.
    assert page.url.endswith(f"/decisions/{blocked[1]['id']}"), page.url
    assert "ticket stage\nexecute" in page.locator("dl.facts").first.inner_text().lower()
    check("/decisions/{id}")
    assert found == {name: [] for name in found}
    assert {name: width for name, width in widths.items() if width > viewport["width"]} == {}
    context.close()
