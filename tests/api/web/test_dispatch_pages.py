"""The board with the dispatch switch and each rule's standing against going live, read as a person reads it: a
paused service said on every page (and each page's tag moves when it is paused), the switch on the decisions page
(a control for operators only), and per rule its mode, its evidence against the thresholds, what it lacks, a Go
live control, and "live without evidence" while it is live by a forced change without the numbers."""

from __future__ import annotations

import html
import json
import re

import pytest

from conftest import BASIC, CI_SECRET, PASSWORDS
from events_kit import ALLOWLIST, seed_board
from router_kit import STRANGER, envelope, route
from testclient import ApiClient

VERA = ("vera", "vera-password-1")
PAGES = ("/", "/initiatives", "/decisions", "/decisions/policy", "/decisions/try", "/tickets/PORT-1")


@pytest.fixture
def api(app_factory, config_factory):
    from domain import accounts

    client = ApiClient(app_factory(config_factory(router_allowlist=ALLOWLIST)), basic=BASIC, ci_secret=CI_SECRET)
    accounts.add(VERA[0], "viewer", VERA[1], passwords=PASSWORDS)
    seed_board(client, tickets={"PORT-1": "queued"})
    return client


def viewer(api) -> ApiClient:
    return ApiClient(api.client.app, basic=":".join(VERA), ci_secret=CI_SECRET)


def text(page: str) -> str:
    words = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))
    return re.sub(r" ([,.:)])", r"\1", words).strip()


def standing(page: str, rule: str) -> str:
    return re.search(rf'<li id="standing-{rule}".*?</li>', page, re.S).group(0)


def test_a_paused_service_is_said_on_every_page_and_moves_every_page_s_tag(api, clock):
    tags = {}
    for path in PAGES:
        seen = api.get(path)
        assert seen.status_code == 200, path
        assert "Dispatch is paused" not in seen.text
        tags[path] = seen.headers.get("ETag")  # Try a policy has none: it is worked out on every request
    assert api.put("/api/v1/router/dispatch", json={"paused": True, "reason": "the forge is down"}).status_code == 200
    clock.advance(minutes=3)
    for path in PAGES:
        fresh = api.get(path, headers={"If-None-Match": tags[path]} if tags[path] else {})
        assert fresh.status_code == 200, path  # not 304: the page changed
        banner = re.search(r'<p class="dispatch-paused".*?</p>', fresh.text, re.S)
        assert banner, path
        assert text(banner.group(0)).startswith("Dispatch is paused: the forge is down (by admin, 3 minutes ago)")
    assert api.put("/api/v1/router/dispatch", json={"paused": False}).status_code == 200
    assert all("Dispatch is paused" not in api.get(path).text for path in PAGES)


def test_the_switch_on_the_decisions_page_is_a_control_for_operators_only(api):
    page = api.get("/decisions").text
    section = re.search(r'<section class="dispatch-switch.*?</section>', page, re.S).group(0)
    assert "running" in text(section) and 'id="dispatch-pause"' in section and 'id="pause-reason"' in section
    api.put("/api/v1/router/dispatch", json={"paused": True, "reason": "release day"})
    section = re.search(r'<section class="dispatch-switch.*?</section>', api.get("/decisions").text, re.S).group(0)
    assert "paused" in text(section) and 'id="dispatch-resume"' in section and 'id="dispatch-pause"' not in section
    looked = re.search(r'<section class="dispatch-switch.*?</section>', viewer(api).get("/decisions").text, re.S)
    assert "<form" not in looked.group(0) and "may look, not change" in text(looked.group(0))


def test_each_rule_shows_its_mode_and_its_evidence_against_the_thresholds(api, clock):
    for _ in range(5):
        route(api, envelope("state_changed", "PORT-1", actor=STRANGER))  # blocked, and nobody takes it up: held
    clock.advance(days=2)
    page = api.get("/decisions").text
    coder = standing(page, "coder")
    version = api.get("/api/v1/router/policy").json["rule_versions"]["coder"]
    words = text(coder)
    assert f"coder shadow Evidence under version {version}: settled 5/20, low 0.57/0.80, over 14 days" in words
    assert "Not earned yet: 5 settled decision(s) of the 20 required" in words
    assert 'id="go-live-coder"' in coder and 'name="force"' in coder and "Force it live" in words
    # The control sends the policy in force with this one rule live.
    sent = json.loads(html.unescape(re.search(r'name="policy" data-type="json" value="([^"]*)"', coder).group(1)))
    assert [(r["name"], r["mode"]) for r in sent["rules"]] == [
        ("wait_for_ci", "shadow"),
        ("coder", "live"),
        ("fixer", "shadow"),
    ]
    assert "nothing to earn" in text(standing(page, "wait_for_ci"))
    assert 'id="go-live-coder"' not in viewer(api).get("/decisions").text


def test_an_earned_rule_offers_go_live_without_forcing(api, clock):
    for _ in range(20):
        route(api, envelope("state_changed", "PORT-1", actor=STRANGER))
    clock.advance(days=2)
    coder = standing(api.get("/decisions").text, "coder")
    assert "settled 20/20, low 0.84/0.80" in text(coder) and "earned" in text(coder)
    assert "Go live" in text(coder) and 'name="force"' not in coder and "Not earned" not in coder


def test_a_rule_forced_live_shows_live_without_evidence_until_it_earns_it(api, clock):
    seen = api.get("/api/v1/router/policy")
    document = seen.json["policy"]
    document["rules"][1]["mode"] = "live"
    forced = api.put(
        "/api/v1/router/policy",
        json={"policy": document, "reason": "coder live", "force": "watched by hand"},
        headers={"If-Match": seen.headers["ETag"]},
    )
    assert forced.status_code == 200
    coder = standing(api.get("/decisions").text, "coder")
    assert "live without evidence" in text(coder) and "watched by hand" in text(coder)
    assert 'id="go-live-coder"' not in coder  # live already
    # The page no longer says the router never starts a worker: it names the live rule.
    head = api.get("/decisions").text.split('class="shadow-note"', 1)[1].split("</p>", 1)[0]
    assert "Live dispatch" in head and "coder" in head and "never starts a worker" not in head
    # Another change keeps it live, and still without evidence.
    now = api.get("/api/v1/router/policy")
    changed = api.put(
        "/api/v1/router/policy",
        json={"policy": {**now.json["policy"], "retry_budget": 4}, "reason": "budget"},
        headers={"If-Match": now.headers["ETag"]},
    )
    assert changed.status_code == 200
    assert "live without evidence" in text(standing(api.get("/decisions").text, "coder"))
    # Once its live decisions have earned it, it no longer shows so.
    for _ in range(20):
        route(api, envelope("state_changed", "PORT-1", actor=STRANGER))
    clock.advance(days=2)
    assert "live without evidence" not in text(standing(api.get("/decisions").text, "coder"))
