"""The router's policy on the web board, read as a person reads it: the panel of the decisions page (the rules in
order, each `when` in words, its mode and version; who set it, when, why), every version one click away with what
each changed, and Try a policy with rules: schema errors said beside the editor, flips by rule, and for an
operator (not a viewer) a form to adopt what was tried."""

from __future__ import annotations

import copy
import html
import json
import re

import pytest

from domain.policy.document import FIRST_RULES

from conftest import BASIC, CI_SECRET
from events_kit import ALLOWLIST, seed_board
from router_kit import envelope, route
from testclient import ApiClient

VERA = ("vera", "vera-password-1")


@pytest.fixture
def api(app_factory, config_factory):
    from domain import accounts

    client = ApiClient(app_factory(config_factory(router_allowlist=ALLOWLIST)), basic=BASIC, ci_secret=CI_SECRET)
    accounts.add(VERA[0], "viewer", VERA[1])
    return client


def text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def adopt(api, rules, reason="a test's change", force=None, **knobs):
    seen = api.get("/api/v1/router/policy")
    document = {**seen.json["policy"], **knobs, "rules": rules}
    body = {"policy": document, "reason": reason, **({"force": force} if force else {})}
    answer = api.put("/api/v1/router/policy", json=body, headers={"If-Match": seen.headers["ETag"]})
    assert answer.status_code == 200, answer.text
    return answer.json


def test_the_decisions_page_shows_the_policy_in_force_with_its_rules_in_words(api):
    page = api.get("/decisions").text
    panel = re.search(r'<section class="policy-panel".*?</section>', page, re.S).group(0)
    words = text(panel)
    version = api.get("/api/v1/router/policy").json
    assert f"Version {version['version']} , set by svc" in words and "SVC_ROUTER_ALLOWLIST" in words
    coder = re.search(r'<li id="rule-coder".*?</li>', panel, re.S).group(0)
    assert (
        text(coder).split()
        == (
            f"coder dispatches coder shadow version {version['rule_versions']['coder']} when transition kind is "
            "state_changed, to is execute, actor kind is not untrusted_comment, eligible for a worker is true"
        ).split()
    )
    assert re.findall(r'data-rule="([a-z_]+)"', panel) == ["wait_for_ci", "coder", "fixer"]  # in order
    assert 'href="/decisions/policy"' in panel and 'href="/decisions/try"' in panel


def test_a_new_version_shows_on_the_decisions_page_and_moves_its_etag(api):
    first = api.get("/decisions")
    tag = first.headers["ETag"]
    assert api.get("/decisions", headers={"If-None-Match": tag}).status_code == 304
    rules = [{"name": "only_fixers", "role": "fixer", "mode": "live", "when": {"transition.kind": "pipeline_failed"}}]
    adopt(api, rules, reason="fixers alone", force="a test has no evidence")
    fresh = api.get("/decisions", headers={"If-None-Match": tag})
    assert fresh.status_code == 200
    panel = text(re.search(r'<section class="policy-panel".*?</section>', fresh.text, re.S).group(0))
    assert "set by admin" in panel and "fixers alone" in panel and "only_fixers dispatches fixer live" in panel


def test_every_version_is_one_click_away_saying_what_it_changed(api):
    first = api.get("/api/v1/router/policy").json
    later = copy.deepcopy(list(FIRST_RULES))
    later.insert(0, {"name": "quiet_docs", "role": None, "when": {"subject.id": {"in": ["DOCS-1", "DOCS-2"]}}})
    later[2]["mode"] = "live"
    del later[3]
    newest = adopt(api, later, reason="docs wait; the fixer goes", force="a test has no evidence", retry_budget=4)
    page = api.get("/decisions/policy")
    assert page.status_code == 200
    versions = re.findall(r'<li id="version-[^"]+" data-version="([0-9a-f]{12})"', page.text)
    assert versions == [newest["version"], first["version"]]
    words = text(page.text)
    assert "in force" in words and "docs wait; the fixer goes" in words
    for said in (
        "retry budget 2 → 4",
        "rule quiet_docs added (no role, shadow): when subject is one of DOCS-1, DOCS-2",
        "rule coder: shadow → live",
        "rule fixer removed",
        "the first version: 3 rule(s)",
    ):
        assert said in words, said
    assert api.get("/decisions/policy", headers={"If-None-Match": page.headers["ETag"]}).status_code == 304


def test_the_versions_page_pages_and_its_links_work(api):
    for budget in range(3, 3 + 22):
        adopt(api, copy.deepcopy(list(FIRST_RULES)), reason=f"budget {budget}", retry_budget=budget)
    page = api.get("/decisions/policy").text
    assert len(re.findall(r'data-version="', page)) == 20
    older = html.unescape(re.search(r'href="(/decisions/policy\?cursor=[^"]+)" rel="next"', page).group(1))
    rest = api.get(older)
    assert rest.status_code == 200 and len(re.findall(r'data-version="', rest.text)) == 3
    assert "the first version" in text(rest.text) and "in force" not in text(rest.text)


def test_try_a_policy_with_rules_counts_flips_by_rule(api):
    seed_board(api, tickets={"PORT-1": "queued", "PORT-2": "queued"})
    route(api, envelope("state_changed", "PORT-1"))
    route(api, envelope("state_changed", "PORT-2"))
    rules = copy.deepcopy(list(FIRST_RULES))
    rules.insert(1, {"name": "hold_port_2", "role": None, "when": {"subject.id": "PORT-2"}})
    tried = api.get("/decisions/try", params={"rules": json.dumps(rules)})
    assert tried.status_code == 200, text(tried.text)
    words = text(tried.text)
    assert "1 of 2 decisions would flip" in words
    assert "would dispatch (coder) → no action (no role) , because of the rules; rule coder → hold_port_2" in words
    by_rule = re.search(r'<table class="scorecard" id="flips-by-rule">(.*?)</table>', tried.text, re.S).group(1)
    assert '<th scope="col">coder</th>' in by_rule and "<td>1</td>" in by_rule
    # The operator may adopt it: the form carries the document tried and the version it was tried against.
    form = re.search(r'<form class="api adopt-policy".*?</form>', tried.text, re.S).group(0)
    in_force = api.get("/api/v1/router/policy")
    assert html.unescape(re.search(r'data-if-match="([^"]*)"', form).group(1)) == in_force.headers["ETag"]
    sent = json.loads(html.unescape(re.search(r'name="policy" data-type="json" value="([^"]*)"', form).group(1)))
    assert [r["name"] for r in sent["rules"]] == ["wait_for_ci", "hold_port_2", "coder", "fixer"]
    assert sent["allowlist"] == sorted(ALLOWLIST)


def test_a_viewer_tries_the_same_policy_and_sees_no_adopt_button(api):
    rules = [{"name": "only_fixers", "role": "fixer", "when": {"transition.kind": "pipeline_failed"}}]
    vera = ApiClient(api.client.app, basic=":".join(VERA), ci_secret=CI_SECRET)
    tried = vera.get("/decisions/try", params={"rules": json.dumps(rules)})
    assert tried.status_code == 200
    assert "adopt-policy" not in tried.text and "Adopt this policy</button>" not in tried.text
    assert "An operator may adopt it" in text(tried.text)
    assert "adopt-policy" in api.get("/decisions/try", params={"rules": json.dumps(rules)}).text


def test_the_policy_in_force_tried_again_offers_nothing_to_adopt(api):
    page = api.get("/decisions/try")
    assert page.status_code == 200 and "adopt-policy" not in page.text
    assert "This is the policy in force." in text(page.text)
    # The editor starts from the rules in force, one to a line.
    editor = html.unescape(re.search(r'<textarea id="try-rules"[^>]*>(.*?)</textarea>', page.text, re.S).group(1))
    assert [r["name"] for r in json.loads(editor)] == ["wait_for_ci", "coder", "fixer"]


@pytest.mark.parametrize(
    ("rules", "said"),
    [
        ("[{", "not JSON"),
        (
            json.dumps(
                [
                    {"name": "coder", "role": "coder", "when": {"transition.knd": "x"}},
                    {"name": "coder", "role": None, "when": {}},
                ]
            ),
            "rule 1 (coder), when → transition.knd: is not a known field",
        ),
        (json.dumps([{"name": "a", "role": "boss", "when": {}}]), "rule 1 (a), role: 'boss' is not one of"),
        (json.dumps({"name": "a"}), "rules: {'name': 'a'} is not of type 'array'"),
    ],
)
def test_a_broken_rules_editor_is_said_beside_it_in_words_and_nothing_is_tried(api, rules, said):
    tried = api.get("/decisions/try", params={"rules": rules})
    assert tried.status_code == 400
    error = re.search(r'<div class="field-error" id="try-rules-error" role="alert">(.*?)</div>', tried.text, re.S)
    assert said in text(error.group(1))
    assert 'aria-invalid="true"' in re.search(r'<textarea id="try-rules"[^>]*>', tried.text).group(0)
    assert "would flip" not in tried.text and "adopt-policy" not in tried.text


def test_two_rules_of_one_name_are_said_with_the_repeat(api):
    twice = [{"name": "same", "role": None, "when": {}}, {"name": "same", "role": "coder", "when": {}}]
    tried = api.get("/decisions/try", params={"rules": json.dumps(twice)})
    assert tried.status_code == 400
    assert "rule 2 (same), name: 'same' is already the name of item 0" in text(tried.text)


def test_a_decision_page_names_the_rule_that_matched(api):
    seed_board(api, tickets={"PORT-1": "queued"})
    decision = route(api, envelope("state_changed", "PORT-1"))
    words = text(api.get(f"/decisions/{decision['id']}").text)
    assert "Rule that matched coder , of 3 rules" in words
