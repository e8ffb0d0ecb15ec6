"""`GET/PUT /api/v1/router/policy` and `GET /api/v1/router/policy/history`: the router's policy as data, versioned
in the database, changed while the service runs, each change naming the version it was decided on; and every bad
request answered with a clear problem that leaves the policy in force as it was."""

from __future__ import annotations

import copy
import json
import logging

import pytest

from domain.policy.document import FIRST_RULES

from conftest import BASIC, CI_SECRET
from events_kit import ALLOWLIST, seed_board
from router_kit import STRANGER, envelope, route
from testclient import ApiClient

VERA = ("vera", "vera-password-1")  # a viewer


@pytest.fixture
def api(app_factory, config_factory):
    from domain import accounts

    client = ApiClient(app_factory(config_factory(router_allowlist=ALLOWLIST)), basic=BASIC, ci_secret=CI_SECRET)
    accounts.add(VERA[0], "viewer", VERA[1])
    return client


def viewer(api: ApiClient) -> ApiClient:
    return ApiClient(api.client.app, basic=":".join(VERA), ci_secret=CI_SECRET)


def first_document() -> dict:
    return {
        "allowlist": sorted(ALLOWLIST),
        "retry_budget": 2,
        "fleet_size": 1,
        "rules": copy.deepcopy(list(FIRST_RULES)),
    }


def put(api, document, *, tag: str | None, reason: str = "a test changes it", **extra):
    headers = {"If-Match": tag} if tag is not None else {}
    return api.put("/api/v1/router/policy", json={"policy": document, "reason": reason, **extra}, headers=headers)


def versions(api) -> list[dict]:
    return api.get("/api/v1/router/policy/history").json["versions"]


def test_the_first_start_stores_the_first_policy_from_the_environment(api):
    seen = api.get("/api/v1/router/policy")
    assert seen.status_code == 200
    body = seen.json
    assert body["policy"] == first_document()
    assert (body["set_by"], body["forced"], body["force"]) == ("svc", False, None)
    assert "SVC_ROUTER_ALLOWLIST" in body["reason"]
    assert seen.headers["ETag"] == f'"{body["version"]}"'
    assert set(body["rule_versions"]) == {"wait_for_ci", "coder", "fixer"}
    # A viewer reads it too.
    assert viewer(api).get("/api/v1/router/policy").json == body
    assert [v["version"] for v in versions(api)] == [body["version"]]


def test_a_change_is_a_new_version_every_later_decision_applies(api, clock):
    seed_board(api, tickets={"PORT-1": "queued", "PORT-2": "queued"})
    before = route(api, envelope("state_changed", "PORT-1", actor=STRANGER))
    assert (before["outcome"], before["rule"]) == ("blocked", "coder")
    seen = api.get("/api/v1/router/policy")
    document = seen.json["policy"]
    document["allowlist"] = sorted([*document["allowlist"], STRANGER])
    # A rule of its own for the stranger's moves, tried before the coder: a later rule never sees them.
    document["rules"].insert(
        1, {"name": "coder_for_bob", "role": "coder", "when": {"actor.id": STRANGER, "transition.to": "execute"}}
    )
    clock.advance(minutes=5)
    changed = put(api, document, tag=seen.headers["ETag"], reason="let Bob code")
    assert changed.status_code == 200, changed.text
    body = changed.json
    assert body["version"] != seen.json["version"] and changed.headers["ETag"] == f'"{body["version"]}"'
    assert body["set_by"] == "admin" and body["reason"] == "let Bob code" and body["forced"] is False
    assert body["policy"]["rules"][1] == {
        "name": "coder_for_bob",
        "role": "coder",
        "mode": "shadow",  # written into the stored document
        "when": {"actor.id": STRANGER, "transition.to": "execute"},
    }
    after = route(api, envelope("state_changed", "PORT-2", actor=STRANGER))
    assert (after["outcome"], after["role"], after["rule"]) == ("would_dispatch", "coder", "coder_for_bob")
    assert after["policy"]["version"] == body["version"] and after["policy"]["rules"] == body["policy"]["rules"]
    assert after["mode"] == "shadow" and after["dispatched"] is False
    # The earlier decision keeps the policy it was taken under.
    kept = api.get("/api/v1/router/decisions?subject_id=PORT-1").json["decisions"][0]
    assert kept["policy"]["version"] == seen.json["version"] and kept["rule"] == "coder"
    assert [v["version"] for v in versions(api)] == [body["version"], seen.json["version"]]


def test_the_scorecard_entries_keep_the_rule_and_its_version(api, db_session):
    from storage.models import ScorecardEntry

    seed_board(api, tickets={"PORT-1": "queued"})
    decision = route(api, envelope("state_changed", "PORT-1"))
    entry = ScorecardEntry.get(ScorecardEntry.decision == decision["id"])
    coder_version = api.get("/api/v1/router/policy").json["rule_versions"]["coder"]
    assert (entry.rule, entry.rule_version) == ("coder", coder_version)


def test_a_rule_s_version_ignores_its_mode_and_the_policy_s_does_not(api):
    seen = api.get("/api/v1/router/policy")
    document = seen.json["policy"]
    document["rules"][2]["mode"] = "live"
    changed = put(api, document, tag=seen.headers["ETag"], force="a test makes the fixer live")
    assert changed.status_code == 200, changed.text
    assert changed.json["version"] != seen.json["version"]
    assert changed.json["rule_versions"] == seen.json["rule_versions"]
    assert (changed.json["forced"], changed.json["force"]) == (True, "a test makes the fixer live")


def test_the_same_document_again_stores_no_new_version(api):
    seen = api.get("/api/v1/router/policy")
    document = seen.json["policy"]
    for rule in document["rules"]:
        del rule["mode"]  # left out, the mode is shadow: the same document
    document["allowlist"].reverse()  # and the allowlist is a set
    again = put(api, document, tag=seen.headers["ETag"])
    assert again.status_code == 200
    assert again.json == seen.json
    assert len(versions(api)) == 1


def stored_unchanged(api, seen):
    assert api.get("/api/v1/router/policy").json == seen.json
    assert len(versions(api)) == 1


def test_a_change_without_if_match_is_428_and_changes_nothing(api):
    seen = api.get("/api/v1/router/policy")
    refused = put(api, {**first_document(), "retry_budget": 5}, tag=None)
    assert refused.status_code == 428
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json["type"].endswith("/precondition-required") and "If-Match" in refused.json["detail"]
    stored_unchanged(api, seen)


def test_a_stale_change_is_412_naming_the_version_in_force_and_who_set_it(api):
    seen = api.get("/api/v1/router/policy")
    first = put(api, {**first_document(), "retry_budget": 3}, tag=seen.headers["ETag"], reason="first")
    assert first.status_code == 200
    stale = put(api, {**first_document(), "retry_budget": 5}, tag=seen.headers["ETag"], reason="second")
    assert stale.status_code == 412
    body = stale.json
    assert body["current"] == {"version": first.json["version"]} and body["changed_by"] == "admin"
    assert first.json["version"] in body["detail"] and "by admin" in body["detail"]
    assert stale.headers["ETag"] == first.headers["ETag"]
    assert api.get("/api/v1/router/policy").json["policy"]["retry_budget"] == 3
    assert len(versions(api)) == 2


def test_a_viewer_s_change_is_403_and_changes_nothing(api):
    seen = api.get("/api/v1/router/policy")
    refused = put(viewer(api), {**first_document(), "retry_budget": 5}, tag=seen.headers["ETag"])
    assert refused.status_code == 403 and refused.json["type"].endswith("/viewer")
    stored_unchanged(api, seen)


def test_malformed_json_is_400_and_changes_nothing(api):
    seen = api.get("/api/v1/router/policy")
    refused = api.put(
        "/api/v1/router/policy",
        body=b'{"policy": {"allowlist": [}',
        headers={"Content-Type": "application/json", "If-Match": seen.headers["ETag"]},
    )
    assert refused.status_code == 400 and "not valid JSON" in refused.json["detail"]
    stored_unchanged(api, seen)


def test_every_violation_of_the_document_is_a_422_error_at_its_pointer(api):
    seen = api.get("/api/v1/router/policy")
    document = first_document()
    document["rules"] += [
        {"name": "typo", "role": None, "when": {"transition.knd": "merged"}},  # a path the envelope has not
        {"name": "coder", "role": "coder", "when": {}},  # a name taken
        {"name": "odd", "role": "boss", "when": {"actor.kind": {"like": "hum%"}}},  # a role and a matcher unknown
        {"name": "pm", "role": None, "when": {"actor.kind": {"contains": "pm"}, "actor.roles": "pm"}},
        {"name": "Bad-Name", "role": None, "mode": "loud", "when": {"source": {"in": [], "not": "ci"}}},
    ]
    refused = put(api, document, tag=seen.headers["ETag"])
    assert refused.status_code == 422
    found = {(e["path"], e["message"]) for e in refused.json["errors"]}
    paths = [e["path"] for e in refused.json["errors"]]
    assert paths == sorted(set(paths))  # one error per violation
    assert set(paths) == {
        "/policy/rules/3/when/transition.knd",
        "/policy/rules/4/name",
        "/policy/rules/5/role",
        "/policy/rules/5/when/actor.kind/like",
        "/policy/rules/6/when/actor.kind/contains",
        "/policy/rules/6/when/actor.roles",
        "/policy/rules/7/name",
        "/policy/rules/7/mode",
        "/policy/rules/7/when/source",  # two matchers in one condition
        "/policy/rules/7/when/source/in",  # and `in` with nothing to be in
    }
    assert ("/policy/rules/3/when/transition.knd", "is not a known field") in found
    assert ("/policy/rules/4/name", "'coder' is already the name of item 1") in found
    stored_unchanged(api, seen)


def test_more_rules_than_the_maximum_is_422_and_a_body_past_the_limit_is_413(api):
    seen = api.get("/api/v1/router/policy")
    many = [{"name": f"rule_{n}", "role": None, "when": {"subject.id": f"PORT-{n}"}} for n in range(101)]
    refused = put(api, {**first_document(), "rules": many}, tag=seen.headers["ETag"])
    assert refused.status_code == 422
    assert refused.json["errors"] == [{"path": "/policy/rules", "message": "has 101 items; at most 100 allowed"}]
    huge = [
        {
            "name": f"rule_{n}",
            "role": None,
            "when": {"subject.id": {"in": [f"PORT-{n}-{m}-{'x' * 100}" for m in range(100)]}},
        }
        for n in range(100)
    ]
    body = json.dumps({"policy": {**first_document(), "rules": huge}, "reason": "a mebibyte of rules"})
    assert len(body) > 1_048_576
    too_big = api.put(
        "/api/v1/router/policy",
        body=body,
        headers={"Content-Type": "application/json", "If-Match": seen.headers["ETag"]},
    )
    assert too_big.status_code == 413 and too_big.json["type"].endswith("/payload-too-large")
    stored_unchanged(api, seen)


def test_the_history_pages_newest_first(api):
    tag = api.get("/api/v1/router/policy").headers["ETag"]
    for budget in (3, 4, 5):
        tag = put(api, {**first_document(), "retry_budget": budget}, tag=tag, reason=f"budget {budget}").headers["ETag"]
    page = api.get("/api/v1/router/policy/history?limit=2").json
    assert [v["reason"] for v in page["versions"]] == ["budget 5", "budget 4"]
    rest = api.get(f"/api/v1/router/policy/history?limit=2&cursor={page['next']}").json
    assert [v["policy"]["retry_budget"] for v in rest["versions"]] == [3, 2] and rest["next"] is None


def test_another_process_applies_a_new_version_from_its_next_event(api, app_factory, config_factory):
    """Two apps on one database stand for two API processes: each holds the version it last routed under, and reads
    the version in force again with each event."""
    other = ApiClient(app_factory(config_factory(router_allowlist=ALLOWLIST)), basic=BASIC, ci_secret=CI_SECRET)
    seed_board(api, tickets={"PORT-1": "queued", "PORT-2": "queued"})
    assert route(other, envelope("state_changed", "PORT-1", actor=STRANGER))["outcome"] == "blocked"
    seen = api.get("/api/v1/router/policy")
    opened = put(api, {**first_document(), "allowlist": sorted(ALLOWLIST | {STRANGER})}, tag=seen.headers["ETag"])
    decided = route(other, envelope("state_changed", "PORT-2", actor=STRANGER))
    assert decided["outcome"] == "would_dispatch" and decided["policy"]["version"] == opened.json["version"]


def test_a_start_whose_environment_disagrees_says_so_once_and_changes_nothing(app_factory, config_factory, caplog, api):
    seen = api.get("/api/v1/router/policy")
    disagreeing = config_factory(
        router_allowlist=frozenset({"github:someone-else"}),
        retry_budget_per_day=7,
        policy_variables_set=frozenset({"SVC_ROUTER_ALLOWLIST", "SVC_RETRY_BUDGET"}),
    )
    with caplog.at_level(logging.WARNING, logger="svc.config"):
        app_factory(disagreeing)
    lines = [r.getMessage() for r in caplog.records if r.name == "svc.config"]
    assert len(lines) == 1
    assert "SVC_ROUTER_ALLOWLIST=github:someone-else" in lines[0] and "SVC_RETRY_BUDGET=7" in lines[0]
    assert seen.json["version"] in lines[0] and "svc policy set" in lines[0]
    stored_unchanged(api, seen)
    caplog.clear()
    # An environment that sets neither, or agrees, says nothing.
    with caplog.at_level(logging.WARNING, logger="svc.config"):
        app_factory(config_factory(router_allowlist=frozenset({"github:someone-else"})))
        app_factory(
            config_factory(router_allowlist=ALLOWLIST, policy_variables_set=frozenset({"SVC_ROUTER_ALLOWLIST"}))
        )
    assert [r for r in caplog.records if r.name == "svc.config"] == []


def test_the_openapi_document_says_if_match_is_required_and_428_without_it(api):
    operation = api.document["paths"]["/api/v1/router/policy"]["put"]
    (if_match,) = [p for p in operation["parameters"] if p["name"] == "If-Match"]
    assert if_match["required"] is True and if_match["in"] == "header"
    assert {"412", "428", "422", "403", "413"} <= set(operation["responses"])
