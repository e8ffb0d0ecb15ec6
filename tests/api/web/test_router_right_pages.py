"""Is the router right? on the web board: the scorecard on the decisions page, the decisions behind a number,
Try a policy, and one decision's page with its facts and policy."""

import re

import pytest

from events_kit import ALLOWLIST, seed_board
from router_kit import STRANGER, allowlisted, envelope


@pytest.fixture
def api(app_factory, config_factory):
    return allowlisted(app_factory, config_factory)


@pytest.fixture
def history(api, clock):
    seed_board(api, tickets={"PORT-1": "queued", "PORT-2": "queued", "PORT-3": "queued"})
    ids = []
    for key, actor in (("PORT-1", None), ("PORT-2", STRANGER), ("PORT-3", STRANGER)):
        document = envelope("state_changed", key, **({"actor": actor} if actor else {}))
        ids.append(api.post("/api/v1/events", json=document, auth="ci").json["decision"]["id"])
    clock.advance(hours=1)
    api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-1"})
    api.post("/api/v1/events", json=envelope("opened", "PORT-2", actor="github:mona"), auth="ci")
    clock.advance(days=8)
    return ids


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_decisions_page_shows_the_scorecard_with_links_to_the_decisions_behind_each_number(api, history):
    page = api.get("/decisions").text
    assert "Is the router right?" in page
    row = re.search(r'<tr data-rule="coder">(.*?)</tr>', page, re.S).group(1)
    # confirmed 1, not taken up 0, held 1, overridden 1, pending 0; agreement 2 of 3 settled
    assert re.findall(r"<td>(?:<a [^>]*>)?(\d+)", row)[:5] == ["1", "0", "1", "1", "0"]
    assert "67 %" in text(row) and "3 settled" in text(row)
    assert "<svg" in page and "Agreement by week" in page
    link = re.search(r'href="(/decisions/behind\?number=rule%3Acoder%3Aoverridden[^"]*)"', page).group(1)
    behind = api.get(link.replace("&amp;", "&"))
    assert behind.status_code == 200
    assert "1 decision: rule coder: overridden" in text(behind.text)
    assert f'data-id="{history[1]}"' in behind.text and f'data-id="{history[2]}"' not in behind.text
    gates = re.search(r'<tr data-gate="authorization">(.*?)</tr>', page, re.S).group(1)
    assert re.findall(r"<td>(?:<a [^>]*>)?(\d+)", gates)[:3] == ["1", "1", "0"]


def test_a_shorter_window_and_a_bad_number_answer_pages(api, history):
    hour = api.get("/decisions?window_seconds=3600").text
    assert '<option value="3600" selected>' in hour
    bad = api.get("/decisions/behind?number=rule:boss:confirmed")
    assert bad.status_code == 400 and bad.headers["content-type"].startswith("text/html")
    assert "No such number on the scorecard" in bad.text


def test_try_a_policy_lists_the_flips_by_gate_each_linking_to_its_decision(api, history):
    today = api.get("/decisions/try")
    assert today.status_code == 200 and "0 of 4 decisions would flip" in text(today.text)
    allow = "\n".join([*ALLOWLIST, STRANGER])
    tried = api.get("/decisions/try", params={"allowlist": allow, "retry_budget": "2", "fleet_size": "1"})
    assert "2 of 4 decisions would flip" in text(tried.text)
    by_gate = re.search(r'<table class="scorecard" id="flips-by-gate">(.*?)</table>', tried.text, re.S).group(1)
    assert "<td>2</td>" in by_gate
    for decision_id in history[1:]:
        assert f'<a href="/decisions/{decision_id}">decision {decision_id}</a>' in tried.text
    assert "blocked → would dispatch , because of authorization" in text(tried.text)
    bad = api.get("/decisions/try", params={"fleet_size": "0"})
    assert bad.status_code == 400 and "Fleet size: a whole number, 1 or more" in text(bad.text)


def test_a_decision_page_shows_its_facts_and_policy(api, history):
    page = api.get(f"/decisions/{history[0]}")
    assert page.status_code == 200
    words = text(page.text)
    assert "Ticket stage queued" in words and "Initiative stage active" in words
    assert "Wallet not locked" in words and "Fixer dispatches since the last green pipeline not counted" in words
    assert "Jobs running 0" in words and "The event's age 0 s" in words
    assert "Retry budget 2 fixer jobs per ticket since its last green pipeline" in words and STRANGER not in words
    missing = api.get("/decisions/999999")
    assert missing.status_code == 404 and "No router decision 999999" in missing.text
    assert api.get("/decisions/not-a-number").status_code == 404
