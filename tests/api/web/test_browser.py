"""The web board in headless Chromium against a real `svc serve`: sign in, toggle writing automation and watch
WRITING-DAILY leave and rejoin the Needs-you list without a reload, open a ticket page, mark a ticket done,
filter the router decisions page; at phone width and with the keyboard too. Signed in with a viewer's account the
board offers no action at all; with an operator's, the operator acts and the timeline names them. (Every other
action a person takes on the page, the live refresh and the accessibility check: test_browser_actions.py.)"""

import logging

import pytest
import requests
from playwright.sync_api import expect

from browser_kit import CI_SECRET, DESKTOP, PASSWORD, PHONE, USER, axe_violations
from conftest import PASSWORDS
from events_kit import example

pytestmark = [pytest.mark.browser, pytest.mark.process]


@pytest.fixture
def people(server):
    """The server above, with a viewer's and an operator's account, added in this process on the server's database
    (what `svc user add` does; its processes are tested in tests/end_to_end/test_accounts_processes.py)."""
    from domain import accounts
    from storage import db as storage_db

    with storage_db.connection():
        for name, role in (("vera", "viewer"), ("olga", "operator")):
            accounts.add(name, role, f"{name}-password-1", passwords=PASSWORDS)
    return server


def test_a_viewer_finds_no_action_controls(chromium, people):
    server = people
    context = chromium.new_context(http_credentials={"username": "vera", "password": "vera-password-1"})
    page = context.new_page()
    page.goto(server + "/")
    assert "vera" in page.locator(".signed-in").inner_text() and "viewer" in page.locator(".signed-in").inner_text()
    assert sorted(needs_you_keys(page)) == ["PORT-1", "WRITING-DAILY"]  # everything to read is there
    assert page.locator("#writing-automation-state").inner_text() == "on"
    controls = "button, input, select, textarea, [contenteditable], [data-action]"
    assert page.locator("main").locator(controls).count() == 0
    page.locator('.column[data-stage="execute"] a.key', has_text="PORT-2").click()
    page.wait_for_url(server + "/tickets/PORT-2")
    assert "created in execute" in page.locator(".timeline").inner_text()
    assert page.locator("main").locator(controls).count() == 0
    # And the API agrees with the page: the viewer's browser cannot act behind its back either.
    refused = page.evaluate(
        """async () => (await fetch("/api/v1/tickets/PORT-2/cancel", {method: "POST", credentials: "same-origin",
               headers: {"Content-Type": "application/json"}, body: "{}"})).status"""
    )
    assert refused == 403
    assert requests.get(server + "/api/v1/tickets/PORT-2", auth=(USER, PASSWORD), timeout=10).json()["stage"] == (
        "execute"
    )
    context.close()


def test_an_operator_acts_and_the_timeline_names_them(chromium, people):
    server = people
    context = chromium.new_context(http_credentials={"username": "olga", "password": "olga-password-1"})
    page = context.new_page()
    page.goto(server + "/tickets/PORT-2")
    assert "olga" in page.locator(".signed-in").inner_text()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel PORT-2").click()
    # The page takes the change in place (no reload): the newest timeline entry becomes the cancellation.
    page.wait_for_function("() => document.querySelector('.timeline li.entry').textContent.includes('Cancelled')")
    newest = page.locator(".timeline li.entry").first
    assert "Cancelled" in newest.inner_text() and "by olga" in newest.locator(".by").inner_text()
    assert requests.get(server + "/api/v1/tickets/PORT-2", auth=(USER, PASSWORD), timeout=10).json()["stage"] == (
        "cancelled"
    )
    page.goto(server + "/")
    page.get_by_label("Writing automation (scheduled catch-up)").uncheck()
    page.wait_for_function("() => document.querySelector('#writing-automation-by').textContent.includes('olga')")
    assert "turned off by olga" in page.locator("#writing-automation-by").inner_text()
    context.close()


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


def test_a_refused_automation_change_says_why_beside_the_checkbox(chromium, server):
    context = chromium.new_context(http_credentials={"username": USER, "password": PASSWORD})
    page = context.new_page()
    page.goto(server + "/")
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    # The service refuses this one change (as it would a credential it no longer knows, or a lockout).
    refusal = {"type": "about:blank", "title": "Conflict", "status": 409, "detail": "the service said no, and why"}
    page.route(
        server + "/api/v1/agents/writing/automation",
        lambda route: route.fulfill(status=409, content_type="application/problem+json", json=refusal),
    )
    # A click, not `uncheck()`: the refusal can put the tick back before Playwright looks, which is the point.
    page.get_by_label("Writing automation (scheduled catch-up)").click()
    problem = page.locator("#writing-automation-problem")
    expect(problem).to_contain_text("the service said no, and why")
    assert page.get_by_label("Writing automation (scheduled catch-up)").is_checked()  # as it still is
    assert page.locator("#writing-automation-state").inner_text() == "on"
    assert dialogs == []  # said beside the control, not in a dialog the person must dismiss first
    page.unroute(server + "/api/v1/agents/writing/automation")
    page.get_by_label("Writing automation (scheduled catch-up)").uncheck()  # and once it goes through, it is gone
    expect(page.locator("#writing-automation-state")).to_have_text("off")
    expect(problem).to_be_hidden()
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
    page.evaluate("window.notReloaded = true")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Mark PORT-2 done").click()
    # The page shows the change in place (no reload): the stage reads done and the actions are gone.
    page.wait_for_function("() => document.querySelector('.facts .badge.stage').textContent === 'done'")
    assert page.get_by_role("button", name="Mark PORT-2 done").count() == 0
    assert page.evaluate("window.notReloaded") is True
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


@pytest.fixture
def routed_server(server):
    """The server above, with decisions the router recorded: would-dispatch, no-action, blocked and rejected."""
    envelopes = [
        example("envelopes/mapping/1-tracker-state-changed-queued-to-execute.json"),  # PORT-12 is not on this board
        example("envelopes/mapping/3-ci-pipeline-failed-fixer.json"),
        example("envelopes/mapping/4-poller-dispatch-requested.json"),
        example("envelopes/invalid/unknown-actor-kind.json"),
    ]
    for envelope in envelopes:
        envelope["subject"]["id"] = "PORT-2"  # a ticket this board has
    envelopes.append(example("envelopes/valid/closed.json"))  # a pull request, no ticket
    answer = requests.post(
        f"{server}/api/v1/events", json={"events": envelopes}, headers={"X-Svc-CI-Secret": CI_SECRET}, timeout=10
    )
    answer.raise_for_status()
    assert {r["status"] for r in answer.json()["results"]} == {202, 422}
    return server


def shown_decisions(page) -> list[dict[str, str]]:
    return page.locator("li.decision").evaluate_all(
        "items => items.map(i => ({outcome: i.dataset.outcome, subject: i.dataset.subject}))"
    )


def test_the_decisions_page_filters_to_matching_decisions(chromium, routed_server):
    server = routed_server
    context = chromium.new_context(http_credentials={"username": USER, "password": PASSWORD})
    page = context.new_page()
    page.goto(server + "/")
    page.get_by_role("link", name="Router decisions").click()
    page.wait_for_url(server + "/decisions")
    assert "never starts a worker" in page.locator(".shadow-note").inner_text()
    everything = shown_decisions(page)
    assert len(everything) == 5 and len({d["outcome"] for d in everything}) > 1

    page.get_by_label("Outcome").select_option("rejected")
    with page.expect_navigation():
        page.get_by_role("button", name="Filter").click()
    assert "outcome=rejected" in page.url
    assert shown_decisions(page) == [{"outcome": "rejected", "subject": "PORT-2"}]
    assert page.get_by_label("Outcome").input_value() == "rejected"  # the form keeps the filter

    page.get_by_label("Outcome").select_option("")
    page.get_by_label("Ticket or subject").fill("acme/portfolio#43")
    with page.expect_navigation():
        page.get_by_label("Ticket or subject").press("Enter")
    assert shown_decisions(page) == [{"outcome": "blocked", "subject": "acme/portfolio#43"}]
    # The gate that stopped it is spelled out on its line, not only coloured; every gate is on its own page.
    assert "agreement no initiative is known for the subject" in page.locator("li.decision .failed-gates").inner_text()
    with page.expect_navigation():
        page.locator("li.decision a.decision-link").click()
    verdicts = page.locator("li.decision .gates li").all_inner_texts()
    assert len(verdicts) == 7 and "✗ fail" in verdicts[1].lower() and "✓ pass" in verdicts[2].lower(), verdicts
    page.go_back()

    page.get_by_role("link", name="Clear filters").click()
    page.wait_for_url(server + "/decisions")
    assert len(shown_decisions(page)) == 5
    context.close()


def test_the_decisions_page_works_at_phone_width_with_the_keyboard(chromium, routed_server):
    server = routed_server
    context = chromium.new_context(
        http_credentials={"username": USER, "password": PASSWORD}, viewport={"width": 390, "height": 844}
    )
    page = context.new_page()
    page.goto(server + "/decisions")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the decisions page scrolls sideways at phone width ({width}px)"
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")  # the envelopes, opened
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"an opened envelope makes the page scroll sideways ({width}px)"
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "filter-subject":
            break
    else:
        pytest.fail("the subject filter is not reachable with the keyboard")
    page.keyboard.type("port-2")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert {d["subject"] for d in shown_decisions(page)} == {"PORT-2"}
    # From a decision to its ticket page, by keyboard.
    page.locator("li.decision .decision-subject a").first.focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url == server + "/tickets/PORT-2"
    assert page.locator(".timeline li.decision").count() == 4  # its decisions, in its timeline
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    context.close()


def test_browsers_asking_without_credentials_first_are_never_locked_out(chromium, server, caplog):
    """A browser asks without credentials first and sends the password only when challenged. Challenges are not
    failures: people opening the board from one address (an office behind one NAT, or one person in fresh
    windows), well past the lockout's ten challenges, are never refused (the lockout itself, for wrong passwords:
    test_errors_and_credentials.py)."""
    from api.auth import FAILURE_LIMIT

    caplog.set_level(logging.INFO, logger="svc.access")
    for _ in range(4):
        for path in ("/", "/initiatives", "/decisions", "/tickets/PORT-1", "/decisions/try"):
            context = chromium.new_context(http_credentials={"username": USER, "password": PASSWORD})
            page = context.new_page()
            answer = page.goto(server + path)
            assert answer is not None and answer.status == 200, (path, answer and answer.status)
            page.wait_for_load_state("load")  # its stylesheet and scripts too
            context.close()
    # What the server answered (a browser's own challenges never reach the page's events).
    answered = [(record.route, record.status) for record in caplog.records if record.name == "svc.access"]
    statuses = [status for _, status in answered]
    assert statuses.count(401) > 2 * FAILURE_LIMIT, f"the browsers were challenged {statuses.count(401)} times only"
    assert 429 not in statuses
    assert answered.count(("/static/{name}", 200)) >= 3 * 20  # every page's stylesheet and two scripts
    # And this address is not locked out: the API still answers it with the right credentials.
    assert requests.get(server + "/api/v1/wallet", auth=(USER, PASSWORD), timeout=10).status_code == 200


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_misspelled_query_is_said_on_the_page_with_the_way_back(chromium, server, viewport):
    context = chromium.new_context(http_credentials={"username": USER, "password": PASSWORD}, viewport=viewport)
    page = context.new_page()
    answer = page.goto(server + "/decisions?subject=PORT-1&outcome=blocked")
    assert answer is not None and answer.status == 400
    said = page.get_by_role("alert").filter(has_text="unknown query parameter")
    expect(said).to_contain_text("unknown query parameter 'subject'; did you mean 'subject_id'?")
    assert axe_violations(page) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    page.get_by_role("link", name="Open the page without it").click()
    page.wait_for_url(server + "/decisions?outcome=blocked")
    assert page.get_by_label("Outcome").input_value() == "blocked"
    context.close()
