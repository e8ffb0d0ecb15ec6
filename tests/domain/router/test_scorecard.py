"""Would the router have been right? `GET /api/v1/router/scorecard`: its decisions against what the team did."""

import pytest

from domain.router.scorecard import wilson

from events_kit import seed_board
from router_kit import STRANGER, allowlisted, envelope, route

CI_ACTOR = "gitlab:gitlab-ci"


@pytest.fixture
def api(app_factory, config_factory):
    return allowlisted(app_factory, config_factory)


def card(api, query="") -> dict:
    answer = api.get(f"/api/v1/router/scorecard{query}")
    assert answer.status_code == 200, answer.text
    return answer.json


def counts(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k != "agreement"}


def test_each_kind_of_agreement_and_disagreement(api, clock):
    seed_board(api, tickets={f"PORT-{i}": "queued" for i in range(1, 6)} | {"PORT-9": "ci"})
    # Confirmed: a coder would be dispatched, and a slot is claimed for the ticket an hour later.
    assert route(api, envelope("state_changed", "PORT-1"))["outcome"] == "would_dispatch"
    # Not taken up: a coder would be dispatched, and nothing happens.
    assert route(api, envelope("state_changed", "PORT-2"))["outcome"] == "would_dispatch"
    # Overridden: blocked (the actor is not allowed), and the team opens a merge request anyway.
    assert route(api, envelope("state_changed", "PORT-3", actor=STRANGER))["outcome"] == "blocked"
    # Held: blocked, and nothing happens.
    assert route(api, envelope("state_changed", "PORT-4", actor=STRANGER))["outcome"] == "blocked"
    # A fixer, confirmed by a restarted pipeline.
    assert route(api, envelope("pipeline_failed", "PORT-9", actor=CI_ACTOR))["outcome"] == "would_dispatch"
    clock.advance(hours=1)
    assert api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-1"}).status_code in (200, 201)
    route(api, envelope("opened", "PORT-3", actor="github:mona"))
    route(api, envelope("pipeline_started", "PORT-9", actor=CI_ACTOR))

    open_window = card(api)
    assert counts(open_window["rules"]["coder"]) == {
        "confirmed": 1,
        "not_taken_up": 0,
        "held": 0,
        "overridden": 1,
        "pending": 2,
    }
    assert open_window["rules"]["coder"]["agreement"] == wilson(1, 2)

    clock.advance(days=1)
    settled = card(api)
    assert counts(settled["rules"]["coder"]) == {
        "confirmed": 1,
        "not_taken_up": 1,
        "held": 1,
        "overridden": 1,
        "pending": 0,
    }
    assert settled["rules"]["coder"]["agreement"]["settled"] == 4
    assert settled["rules"]["coder"]["agreement"]["rate"] == 0.5
    assert counts(settled["rules"]["fixer"]) == {
        "confirmed": 1,
        "not_taken_up": 0,
        "held": 0,
        "overridden": 0,
        "pending": 0,
    }
    # The gate's counts are over the blocked decisions it failed: both blocked ones failed authorization.
    assert counts(settled["gates"]["authorization"]) == {"held": 1, "overridden": 1, "pending": 0}
    assert counts(settled["gates"]["fleet"]) == {"held": 0, "overridden": 0, "pending": 0}
    assert settled["gates"]["fleet"]["agreement"] == {"rate": None, "low": None, "high": None, "settled": 0}
    assert len(settled["weeks"]) == 1


def test_the_window_decides_what_counts_as_taken_up(api, clock):
    seed_board(api, tickets={"PORT-1": "queued"})
    route(api, envelope("state_changed", "PORT-1"))
    clock.advance(hours=3)
    route(api, envelope("opened", "PORT-1", actor="github:mona"))
    clock.advance(days=2)
    assert card(api)["rules"]["coder"]["confirmed"] == 1
    two_hours = card(api, "?window_seconds=7200")["rules"]["coder"]
    assert (two_hours["confirmed"], two_hours["not_taken_up"]) == (0, 1)


def test_an_event_never_takes_up_its_own_decision_nor_an_earlier_ticket(api, clock):
    seed_board(api, tickets={"PORT-1": "queued", "PORT-2": "queued"})
    route(api, envelope("synchronized", "PORT-2", actor="github:mona"))  # before any decision about PORT-2
    route(api, envelope("state_changed", "PORT-1"))
    route(api, envelope("state_changed", "PORT-2"))
    clock.advance(days=2)
    coder = card(api)["rules"]["coder"]
    assert (coder["confirmed"], coder["not_taken_up"]) == (0, 2)


def test_settled_days_are_kept_and_read_back_the_same(api, clock, db_session):
    from storage.models import ScorecardDay

    seed_board(api, tickets={f"PORT-{i}": "queued" for i in range(1, 7)})
    for day in range(3):
        route(api, envelope("state_changed", f"PORT-{day + 1}", at=clock()))
        route(api, envelope("state_changed", f"PORT-{day + 4}", actor=STRANGER, at=clock()))
        clock.advance(hours=2)
        route(api, envelope("opened", f"PORT-{day + 1}", actor="github:mona", at=clock()))
        clock.advance(days=1)
    clock.advance(days=2)
    first = card(api)
    kept = ScorecardDay.select().where(ScorecardDay.window_seconds == 86400).count()
    assert kept > 0  # the settled days were counted once and kept
    again = card(api)
    assert again == first
    assert counts(first["rules"]["coder"]) == {
        "confirmed": 3,
        "not_taken_up": 0,
        "held": 3,
        "overridden": 0,
        "pending": 0,
    }
    # A range that cuts days reads their entries: only the decisions evaluated in it count.
    since = first["until"][:10]
    assert card(api, f"?since={since}T00:00:00Z")["rules"]["coder"]["held"] == 0


def test_bad_scorecard_queries_are_problems(api):
    for query in ("?window_seconds=10", "?window_seconds=day", "?since=yesterday"):
        answer = api.get(f"/api/v1/router/scorecard{query}")
        assert answer.status_code == 400, query
        assert answer.headers["content-type"].startswith("application/problem+json")


def test_wilson_interval():
    assert wilson(0, 0)["rate"] is None
    half = wilson(5, 10)
    assert half["rate"] == 0.5 and half["low"] < 0.5 < half["high"]
    assert wilson(10, 10)["high"] == 1.0 and wilson(10, 10)["low"] > 0.65
