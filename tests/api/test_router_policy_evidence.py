"""A rule goes live only on its evidence (`PUT router/policy`, `domain/router/policy_versions.judge`): over the
last 14 days of its decisions under its present version, at least 20 settled and the low end of the agreement's
Wilson interval at least 0.8; else 409 with the numbers and nothing stored, unless forced with a reason."""

from __future__ import annotations

import pytest

from conftest import BASIC, CI_SECRET
from events_kit import ALLOWLIST, seed_board
from router_kit import STRANGER, envelope, route
from testclient import ApiClient

NOT_EARNED = "https://svc.invalid/problems/not-earned"


@pytest.fixture
def api(app_factory, config_factory):
    client = ApiClient(app_factory(config_factory(router_allowlist=ALLOWLIST)), basic=BASIC, ci_secret=CI_SECRET)
    seed_board(client, tickets={"PORT-1": "queued"})
    return client


def held_decisions(api, count: int) -> None:
    """`count` coder decisions the authorization gate blocks (a stranger moves PORT-1 to execute) and nobody takes
    up: once their day has passed, each is held, and agrees with what the team did."""
    for _ in range(count):
        decision = route(api, envelope("state_changed", "PORT-1", actor=STRANGER))
        assert (decision["outcome"], decision["rule"]) == ("blocked", "coder")


def dispatched_and_left(api, count: int) -> None:
    """`count` coder decisions that would dispatch and nobody takes up: each disagrees with the team."""
    for _ in range(count):
        decision = route(api, envelope("state_changed", "PORT-1"))
        assert (decision["outcome"], decision["rule"]) == ("would_dispatch", "coder")


def make_live(api, rule: str = "coder", *, change=None, **extra):
    seen = api.get("/api/v1/router/policy")
    document = seen.json["policy"]
    for found in document["rules"]:
        if found["name"] == rule:
            found["mode"] = "live"
            if change:
                change(found)
    return api.put(
        "/api/v1/router/policy",
        json={"policy": document, "reason": f"{rule} goes live", **extra},
        headers={"If-Match": seen.headers["ETag"]},
    )


def history(api) -> list[str]:
    return [v["version"] for v in api.get("/api/v1/router/policy/history").json["versions"]]


def test_a_rule_without_evidence_is_refused_with_its_numbers_and_nothing_is_stored(api, clock):
    held_decisions(api, 5)
    clock.advance(days=2)
    before = history(api)
    refused = make_live(api)
    assert refused.status_code == 409
    assert refused.headers["Content-Type"].startswith("application/problem+json")
    body = refused.json
    assert body["type"] == NOT_EARNED
    assert "coder" in body["detail"] and "5 settled decision(s) of the 20 required" in body["detail"]
    assert body["evidence"] == {"coder": {"settled": 5, "low": 0.5655, "required_settled": 20, "required_low": 0.8}}
    assert history(api) == before
    assert api.get("/api/v1/router/policy").json["version"] == before[0]


def test_a_rule_whose_agreement_is_too_low_is_refused_however_many_it_settled(api, clock):
    held_decisions(api, 20)
    dispatched_and_left(api, 10)
    clock.advance(days=2)
    refused = make_live(api)
    assert refused.status_code == 409
    numbers = refused.json["evidence"]["coder"]
    assert numbers["settled"] == 30 and numbers["low"] < 0.8
    assert "below the 0.80 required" in refused.json["detail"]


def test_a_rule_that_earned_it_goes_live(api, clock):
    held_decisions(api, 20)
    clock.advance(days=2)
    adopted = make_live(api)
    assert adopted.status_code == 200, adopted.text
    assert (adopted.json["forced"], adopted.json["force"]) == (False, None)
    assert [r["mode"] for r in adopted.json["policy"]["rules"] if r["name"] == "coder"] == ["live"]


def test_pending_decisions_are_not_settled_evidence(api, clock):
    held_decisions(api, 20)
    clock.advance(hours=23)  # their day is not over: none is settled yet
    refused = make_live(api)
    assert refused.status_code == 409
    assert refused.json["evidence"]["coder"]["settled"] == 0


def test_the_evidence_of_another_version_of_the_rule_does_not_count(api, clock):
    held_decisions(api, 20)
    clock.advance(days=2)

    def narrower(rule):
        rule["when"] = {**rule["when"], "transition.from": "queued"}

    refused = make_live(api, change=narrower)  # a new version of the coder rule: it has earned nothing yet
    assert refused.status_code == 409
    assert refused.json["evidence"]["coder"]["settled"] == 0


def test_decisions_older_than_the_window_do_not_count(api, clock):
    held_decisions(api, 20)
    clock.advance(days=15)
    refused = make_live(api)
    assert refused.status_code == 409
    assert refused.json["evidence"]["coder"]["settled"] == 0


def test_the_window_is_the_setting_s(app_factory, config_factory, clock):
    api = ApiClient(
        app_factory(
            config_factory(
                router_allowlist=ALLOWLIST, promotion_days=30, promotion_min_settled=10, promotion_min_agreement=0.7
            )
        ),
        basic=BASIC,
        ci_secret=CI_SECRET,
    )
    seed_board(api, tickets={"PORT-1": "queued"})
    held_decisions(api, 12)
    clock.advance(days=15)
    adopted = make_live(api)
    assert adopted.status_code == 200, adopted.text


def test_forcing_it_with_a_reason_adopts_it_and_says_so(api):
    forced = make_live(api, force="we watch it by hand this week")
    assert forced.status_code == 200, forced.text
    assert (forced.json["forced"], forced.json["force"]) == (True, "we watch it by hand this week")
    assert history(api)[0] == forced.json["version"]


def test_every_refused_rule_is_named(api, clock):
    seen = api.get("/api/v1/router/policy")
    document = seen.json["policy"]
    for rule in document["rules"]:
        rule["mode"] = "live"
    refused = api.put(
        "/api/v1/router/policy",
        json={"policy": document, "reason": "all live"},
        headers={"If-Match": seen.headers["ETag"]},
    )
    assert refused.status_code == 409
    # wait_for_ci has no role: live or not, it dispatches nothing, so it has nothing to earn.
    assert set(refused.json["evidence"]) == {"coder", "fixer"}
    assert "rule coder" in refused.json["detail"] and "rule fixer" in refused.json["detail"]


def test_a_rule_already_live_stays_live_when_another_part_of_the_policy_changes(api):
    assert make_live(api, force="by hand").status_code == 200
    seen = api.get("/api/v1/router/policy")
    document = {**seen.json["policy"], "retry_budget": 5}
    changed = api.put(
        "/api/v1/router/policy",
        json={"policy": document, "reason": "a bigger budget"},
        headers={"If-Match": seen.headers["ETag"]},
    )
    assert changed.status_code == 200, changed.text
    assert changed.json["forced"] is False
    assert [r["mode"] for r in changed.json["policy"]["rules"] if r["name"] == "coder"] == ["live"]
