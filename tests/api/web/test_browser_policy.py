"""The router's policy in headless Chromium: an operator tries rules on the recorded decisions and adopts them, a
stale adopt is refused on the page, a viewer sees no adopt button, and the policy's pages have no axe violations
at a laptop's and a phone's width, nothing scrolling sideways."""

import json
import re

import pytest
import requests
from playwright.sync_api import expect

from browser_kit import CI_SECRET, DESKTOP, PASSWORD, PHONE, USER, axe_violations
from conftest import PASSWORDS
from router_kit import envelope

pytestmark = [pytest.mark.browser]

MONA = "github:mona"  # on no allowlist of this server's: her moves to execute are blocked
HOLD_PORT_2 = {"name": "hold_port_2", "role": None, "when": {"subject.id": "PORT-2"}}


def api(server, method, path, body=None, headers=None):
    answer = requests.request(method, server + path, json=body, auth=(USER, PASSWORD), headers=headers, timeout=10)
    answer.raise_for_status()
    return answer


def record_decisions(server):
    for key in ("PORT-1", "PORT-2"):
        document = envelope("state_changed", key, actor=MONA, initiative="port")
        answer = requests.post(
            server + "/api/v1/events", json=document, headers={"X-Svc-CI-Secret": CI_SECRET}, timeout=10
        )
        assert answer.status_code == 202, answer.text


def rules_with_hold(server) -> list[dict]:
    rules = api(server, "GET", "/api/v1/router/policy").json()["policy"]["rules"]
    return [rules[0], HOLD_PORT_2, *rules[1:]]


def open_as(chromium, user, password, *, viewport=DESKTOP):
    context = chromium.new_context(http_credentials={"username": user, "password": password}, viewport=viewport)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.script_errors = errors
    return context, page


def test_an_operator_tries_rules_and_adopts_them_end_to_end(chromium, server):
    record_decisions(server)
    before = api(server, "GET", "/api/v1/router/policy").json()
    context, page = open_as(chromium, USER, PASSWORD)
    page.goto(server + "/decisions")
    page.get_by_role("link", name="Try a policy").first.click()
    page.wait_for_url("**/decisions/try")
    page.get_by_label("Allowlist").fill(MONA)
    page.get_by_role("textbox", name=re.compile("^Rules")).fill(json.dumps(rules_with_hold(server), indent=2))
    with page.expect_navigation():
        page.get_by_role("button", name="Try it").click()
    # Mona is let through, and the new rule holds PORT-2 back: one of the two flips because of the gate, the other
    # because of the rule.
    assert page.get_by_role("heading", name="1 of 2 decisions would flip").is_visible()
    by_rule = page.get_by_role("region", name="Flips by rule")
    assert "coder" in by_rule.inner_text()
    page.get_by_label("Why").fill("let Mona code, hold PORT-2")
    with page.expect_navigation():
        page.get_by_role("button", name="Adopt this policy").click()
    assert page.url.startswith(server + "/decisions")
    panel = page.locator("section.policy-panel")
    expect(panel).to_contain_text("let Mona code, hold PORT-2")
    expect(panel.locator('li[data-rule="hold_port_2"]')).to_contain_text("when subject is PORT-2")
    after = api(server, "GET", "/api/v1/router/policy").json()
    assert after["version"] != before["version"] and after["set_by"] == USER
    assert after["policy"]["allowlist"] == [MONA] and after["reason"] == "let Mona code, hold PORT-2"
    assert [r["name"] for r in after["policy"]["rules"]] == ["wait_for_ci", "hold_port_2", "coder", "fixer"]
    assert not page.script_errors
    context.close()


def test_a_stale_adopt_is_refused_and_said_on_the_page(chromium, server):
    record_decisions(server)
    context, page = open_as(chromium, USER, PASSWORD)
    page.goto(server + "/decisions/try?" + requests.compat.urlencode({"rules": json.dumps(rules_with_hold(server))}))
    # Meanwhile a colleague changes the policy.
    seen = api(server, "GET", "/api/v1/router/policy")
    theirs = {**seen.json()["policy"], "retry_budget": 5}
    api(
        server,
        "PUT",
        "/api/v1/router/policy",
        {"policy": theirs, "reason": "a colleague's"},
        {"If-Match": seen.headers["ETag"]},
    )
    page.get_by_label("Why").fill("hold PORT-2")
    page.get_by_role("button", name="Adopt this policy").click()
    problem = page.locator("#adopt-problem")
    expect(problem).to_contain_text("the router's policy was set to version")
    expect(problem).to_contain_text(f"by {USER}")
    expect(problem).to_contain_text("Nothing was changed")
    in_force = api(server, "GET", "/api/v1/router/policy").json()
    assert in_force["reason"] == "a colleague's" and in_force["policy"]["retry_budget"] == 5
    assert "hold_port_2" not in [r["name"] for r in in_force["policy"]["rules"]]
    assert page.url.startswith(server + "/decisions/try")
    context.close()


def test_a_viewer_sees_the_same_page_with_no_adopt_button(chromium, server):
    from domain import accounts

    accounts.add("vera", "viewer", "vera-password-1", passwords=PASSWORDS)
    record_decisions(server)
    context, page = open_as(chromium, "vera", "vera-password-1")
    page.goto(server + "/decisions/try?" + requests.compat.urlencode({"rules": json.dumps(rules_with_hold(server))}))
    assert page.get_by_role("heading", name="1 of 2 decisions would flip").is_visible()
    assert page.get_by_role("button", name="Adopt this policy").count() == 0
    expect(page.locator("section.adopt")).to_contain_text("An operator may adopt it")
    context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_policy_s_pages_have_no_axe_violations(chromium, server, viewport):
    record_decisions(server)
    seen = api(server, "GET", "/api/v1/router/policy")
    changed = {**seen.json()["policy"], "rules": rules_with_hold(server)}
    api(
        server,
        "PUT",
        "/api/v1/router/policy",
        {"policy": changed, "reason": "hold PORT-2"},
        {"If-Match": seen.headers["ETag"]},
    )
    context, page = open_as(chromium, USER, PASSWORD, viewport=viewport)
    broken = json.dumps([{"name": "x", "role": "boss", "when": {"transition.knd": 1}}])
    tried = json.dumps([HOLD_PORT_2])
    found, widths = {}, {}
    for path in (
        "/decisions",
        "/decisions/policy",
        "/decisions/try?" + requests.compat.urlencode({"rules": tried, "allowlist": MONA}),
        "/decisions/try?" + requests.compat.urlencode({"rules": broken}),
    ):
        page.goto(server + path)
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        found[path] = axe_violations(page)
        widths[path] = page.evaluate("document.documentElement.scrollWidth")
    assert page.locator("#try-rules-error").is_visible()
    assert found == {path: [] for path in found}
    assert {path: width for path, width in widths.items() if width > viewport["width"]} == {}
    context.close()
