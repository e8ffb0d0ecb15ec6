"""The reproduction law: under the policy each decision recorded, a backtest flips nothing.

Hypothesis generates boards (tickets in any stage, the initiative's stage, the wallet, slots held) and event
histories (coders, fixers, signals, board changes between them, time passing, the policy changed midway by a
restart with another configuration); the router records its decisions live, and the backtest then evaluates
every one again from its recorded facts and policy alone. Runs on both backends like every database test.
"""

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.router.backtest import backtest
from storage import reset
from storage.db import connection

from router_kit import envelope
from testclient import ApiClient

ACTORS = ("github:mona", "github:bob", "gitlab:gitlab-ci", "linear:6d3a8c8e-3b1f-4b9e-a2c4-9f7d1e2b3c4d")
STAGES = ("queued", "execute", "ci", "human_test", "human_merge", "blocked")
KEYS = ("PORT-1", "PORT-2", "PORT-3", "DOCS-1")

policies = st.fixed_dictionaries(
    {
        "allowlist": st.frozensets(st.sampled_from(ACTORS)),
        "retry_budget": st.integers(min_value=0, max_value=3),
    }
)
events = st.one_of(
    st.tuples(
        st.just("event"),
        st.sampled_from(
            ("state_changed", "pipeline_failed", "opened", "synchronized", "pipeline_started", "needs_you")
        ),
        st.sampled_from(KEYS),
        st.sampled_from(ACTORS),
        st.sampled_from(("execute", "human_test")),
    ),
    st.tuples(st.just("move"), st.sampled_from(KEYS), st.sampled_from(STAGES)),
    st.tuples(st.just("wallet"), st.booleans()),
    st.tuples(st.just("claim"), st.sampled_from(KEYS), st.sampled_from(("bay-1", "bay-2"))),
    st.tuples(st.just("initiative"), st.sampled_from(("agree", "active"))),
    st.tuples(st.just("wait"), st.integers(min_value=1, max_value=30 * 60)),
)
histories = st.fixed_dictionaries(
    {
        "initiative": st.sampled_from(("agree", "active")),
        "tickets": st.fixed_dictionaries({key: st.sampled_from(STAGES) for key in KEYS[:3]}),
        "first": policies,
        "second": policies,
        "events": st.lists(events, min_size=1, max_size=25),
        "switch_at": st.integers(min_value=0, max_value=25),
    }
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories)
def test_under_the_recorded_policy_a_backtest_flips_nothing(history, app_factory, config_factory, clock):
    from conftest import BASIC, CI_SECRET

    def app_under(policy):
        config = config_factory(router_allowlist=policy["allowlist"], retry_budget_per_day=policy["retry_budget"])
        return ApiClient(app_factory(config), basic=BASIC, ci_secret=CI_SECRET)

    api = app_under(history["first"])
    with connection():
        reset.empty()
    api.post("/api/v1/initiatives", json={"id": "portfolio", "name": "Portfolio"})
    if history["initiative"] == "active":
        api.patch("/api/v1/initiatives/portfolio", json={"stage": "active"})
    for key, stage in history["tickets"].items():
        api.post("/api/v1/tickets", json={"key": key, "initiative_id": "portfolio", "title": key, "stage": stage})

    accepted = 0
    for index, step in enumerate(history["events"]):
        if index == history["switch_at"]:
            api = app_under(history["second"])  # a restart with another configuration
        kind = step[0]
        if kind == "event":
            _, event_kind, key, actor, to = step
            document = envelope(event_kind, key, actor=actor, to=to if event_kind == "state_changed" else None)
            answer = api.post("/api/v1/events", json=document, auth="ci")
            assert answer.status_code == 202, answer.text
            accepted += 1
        elif kind == "move":
            api.post(f"/api/v1/tickets/{step[1]}/move", json={"to": step[2]})
        elif kind == "wallet":
            api.put("/api/v1/wallet", json={"budget": 100, "spent": 10, "locked": step[1]})
        elif kind == "claim":
            api.post(f"/api/v1/slots/{step[2]}/claim", json={"ticket": step[1]})
        elif kind == "initiative":
            api.patch("/api/v1/initiatives/portfolio", json={"stage": step[1]})
        else:
            clock.advance(seconds=step[1])
    clock.advance(hours=1)

    with connection():
        report = backtest(None)
    assert report.evaluated == accepted
    assert report.not_replayable == 0
    assert report.flipped == 0, report.flips
    assert report.unchanged == accepted
    # And a backtest over the same history with a candidate that changes nothing of the last policy flips
    # nothing after the restart either.
    with connection():
        tail = backtest(None, since=clock() - timedelta(days=365))
    assert tail.flipped == 0
