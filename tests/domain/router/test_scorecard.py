"""Would the router have been right? `GET /api/v1/router/scorecard`: its decisions against what the team did."""

from datetime import timedelta

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


def _history(api, clock, days: int = 3) -> None:
    """Three days of decisions, each taken up or not, then the clock past their windows."""
    seed_board(api, tickets={f"PORT-{i}": "queued" for i in range(1, 2 * days + 1)})
    for day in range(days):
        route(api, envelope("state_changed", f"PORT-{day + 1}", at=clock()))
        route(api, envelope("state_changed", f"PORT-{day + days + 1}", actor=STRANGER, at=clock()))
        clock.advance(hours=2)
        route(api, envelope("opened", f"PORT-{day + 1}", actor="github:mona", at=clock()))
        clock.advance(days=1)
    clock.advance(days=2)


def _rows_of_every_table() -> dict[str, int]:
    from storage.models import ALL_MODELS

    return {model._meta.table_name: model.select().count() for model in ALL_MODELS}


def _keep(clock) -> None:
    """The jobs process's scorecard counter, stepped until it has nothing left."""
    from jobs.assembly import scorecard_counter

    step = scorecard_counter(clock).step
    while step():
        pass


def test_settled_days_are_kept_by_the_jobs_process_and_read_back_the_same(api, clock, db_session):
    from storage.models import ScorecardDay, ScorecardMark

    _history(api, clock)
    scanned = card(api)  # nothing kept yet: every entry read
    assert ScorecardDay.select().count() == 0
    _keep(clock)
    kept_days = {row.day for row in ScorecardDay.select()}
    assert len(kept_days) == 3  # the three days with decisions, no row for an empty day
    assert ScorecardMark.get_by_id(86400).through == clock().date() - timedelta(days=2)
    kept = card(api)
    assert kept == scanned  # the kept counts are the full scan's
    assert counts(kept["rules"]["coder"]) == {
        "confirmed": 3,
        "not_taken_up": 0,
        "held": 3,
        "overridden": 0,
        "pending": 0,
    }
    # A range that cuts days reads their entries: only the decisions evaluated in it count.
    since = kept["until"][:10]
    assert card(api, f"?since={since}T00:00:00Z")["rules"]["coder"]["held"] == 0
    # A range that starts inside the first kept day scans that day's part of it: the same as from its start.
    first = min(kept_days)
    assert card(api, f"?since={first}T00:00:01Z")["rules"] == kept["rules"]
    # Counting again finds nothing to do and keeps nothing more.
    before = ScorecardDay.select().count()
    from domain.router.scorecard import keep_settled_days

    assert keep_settled_days(now=clock()) is False
    assert ScorecardDay.select().count() == before


@pytest.mark.both_backends
def test_a_century_on_an_empty_database_is_answered_writing_nothing(api, clock, db_session):
    before = _rows_of_every_table()
    century = card(api, "?since=1900-01-01T00:00:00Z")
    assert _rows_of_every_table() == before
    tight = card(api, f"?since={(clock() - timedelta(days=1)).strftime('%Y-%m-%dT%H:%M:%SZ')}")
    assert century["rules"] == tight["rules"] and century["gates"] == tight["gates"]
    assert century["since"] == "1900-01-01T00:00:00.000000Z"
    assert century["weeks"] == []


@pytest.mark.both_backends
def test_a_century_with_decisions_answers_as_a_tight_range_and_writes_nothing(api, clock, db_session):
    _history(api, clock)
    _keep(clock)
    assert (
        route(api, envelope("state_changed", "PORT-1", at=clock()))["outcome"] == "would_dispatch"
    )  # pending, after the mark
    clock.advance(minutes=1)
    before = _rows_of_every_table()
    century = card(api, "?since=1900-01-01T00:00:00Z&until=2999-01-01T00:00:00Z")
    tight = card(api, f"?since={(clock() - timedelta(days=6)).strftime('%Y-%m-%dT%H:%M:%SZ')}")
    whole = card(api)
    assert _rows_of_every_table() == before
    for other in (tight, whole):
        assert century["rules"] == other["rules"] and century["gates"] == other["gates"]
    assert century["rules"]["coder"]["pending"] == 1
    # Its weeks start at the first decision's, not in 1900.
    assert len(century["weeks"]) <= 3


@pytest.mark.both_backends
def test_kept_counts_equal_a_full_scan_at_every_mark(api, clock, db_session):
    """Each step of the counter moves the mark a day; at each, the answer is the one nothing kept gives."""
    from domain.router.scorecard import keep_settled_days
    from storage.models import ScorecardDay, ScorecardMark

    _history(api, clock, days=4)
    scanned = card(api)
    while keep_settled_days(now=clock(), at_most=1):
        assert card(api) == scanned
    assert card(api) == scanned
    # Dropping the kept days (as an import does) goes back to the scan, and the counter counts them again.
    from domain import units
    from domain.router.scorecard import forget_days_from

    mark = ScorecardMark.get_by_id(86400)
    units.run(lambda: forget_days_from(clock() - timedelta(days=4)))
    dropped = ScorecardMark.get_by_id(86400)
    assert dropped.version > mark.version and dropped.through < mark.through
    assert card(api) == scanned
    _keep(clock)
    assert card(api) == scanned and ScorecardDay.select().count() > 0


@pytest.mark.both_backends
def test_a_window_is_judged_to_the_microsecond_where_the_database_counts(api, clock):
    """The database counts the days not kept yet (`storage.scorecard.tally`): taken up exactly a window after, it is
    confirmed, a microsecond later it is not; a decision exactly a window old is judged, a younger one is pending:
    as `classify` judges a decision alone (the decisions behind a number)."""
    seed_board(api, tickets={f"PORT-{i}": "queued" for i in range(1, 5)})
    clock.advance(microseconds=123_457)
    for key in ("PORT-1", "PORT-2"):
        route(api, envelope("state_changed", key, at=clock()))
    clock.advance(seconds=1)
    route(api, envelope("state_changed", "PORT-3", at=clock()))
    clock.advance(hours=2, seconds=-1)
    route(api, envelope("opened", "PORT-1", actor="github:mona", at=clock()))  # taken up exactly 2 h after
    clock.advance(microseconds=1)
    route(api, envelope("opened", "PORT-2", actor="github:mona", at=clock()))  # 2 h and a microsecond after
    clock.advance(seconds=1, microseconds=-2)
    route(api, envelope("state_changed", "PORT-4", at=clock()))  # a microsecond old when the scorecard is read
    clock.advance(microseconds=1)  # PORT-3's decision is exactly 2 h old now
    coder = card(api, "?window_seconds=7200")["rules"]["coder"]
    assert counts(coder) == {"confirmed": 1, "not_taken_up": 2, "held": 0, "overridden": 0, "pending": 1}


@pytest.mark.both_backends
def test_whole_weeks_and_a_rules_standing_read_from_kept_counts_equal_a_full_scan(api, clock, db_session):
    """Seventeen days: the weeks' sums, counted over several steps, and the days at a range's ends give what the
    entries give, for the scorecard, a range cut mid-week and the coder rule's standing; dropping the days from the
    middle of a week (as an import does) and counting again, too."""
    from domain import units
    from domain.policy.document import Policy
    from domain.router.scorecard import forget_days_from, keep_settled_days, rule_agreement
    from storage.models import ScorecardWeek

    _history(api, clock, days=17)
    coder = next(rule for rule in Policy(frozenset()).rules if rule.name == "coder")
    since = (clock() - timedelta(days=15, hours=5)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def read() -> tuple:
        standing = rule_agreement(coder, since=clock() - timedelta(days=14), now=clock())
        return card(api), card(api, f"?since={since}"), standing

    scanned = read()
    assert scanned[0]["rules"]["coder"]["confirmed"] == 17 and scanned[2]["settled"] > 0
    while keep_settled_days(now=clock(), at_most=3):
        assert read() == scanned
    assert read() == scanned
    assert ScorecardWeek.select().count() > 0
    units.run(lambda: forget_days_from(clock() - timedelta(days=9)))
    assert read() == scanned
    while keep_settled_days(now=clock(), at_most=5):
        pass
    assert read() == scanned


def test_a_range_that_ends_before_it_starts_is_refused(api):
    answer = api.get("/api/v1/router/scorecard?since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z")
    assert answer.status_code == 400
    assert "before it starts" in answer.json["detail"]


def test_wilson_interval():
    assert wilson(0, 0)["rate"] is None
    half = wilson(5, 10)
    assert half["rate"] == 0.5 and half["low"] < 0.5 < half["high"]
    assert wilson(10, 10)["high"] == 1.0 and wilson(10, 10)["low"] > 0.65
