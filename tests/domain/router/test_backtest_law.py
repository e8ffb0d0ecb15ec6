"""The reproduction law: under the policy each decision recorded, a backtest flips nothing; and under a candidate
that only reorders rules which never match the same event, nothing flips either.

Hypothesis generates boards (tickets in any stage, the initiative's stage, the wallet, slots held), event
histories (coders, fixers, signals, board changes between them, time passing) and policies: knobs and rule lists
(envelope paths, every matcher, any order), the policy changed midway (`PUT router/policy`). The router records its
decisions live, and the backtest then evaluates every one again from its recorded facts and policy alone. The
second policy's rules each name a ticket of their own, so no two of them match one event: any order of them is the
same policy for every event, and reordering them flips nothing of what was decided under it. Runs on both
backends like every database test.
"""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.policy.document import Policy
from domain.router.backtest import backtest
from storage import reset
from storage.db import connection

from router_kit import envelope
from testclient import ApiClient

ACTORS = ("github:mona", "github:bob", "gitlab:gitlab-ci", "linear:6d3a8c8e-3b1f-4b9e-a2c4-9f7d1e2b3c4d")
STAGES = ("queued", "execute", "ci", "human_test", "human_merge", "blocked")
KEYS = ("PORT-1", "PORT-2", "PORT-3", "DOCS-1")
KINDS = ("state_changed", "pipeline_failed", "opened", "synchronized", "pipeline_started", "needs_you")

# What the rules may read, each path with values its events carry (and some they never do).
VALUES = {
    "source": ("tracker", "forge", "ci", "svc", "poller"),
    "transition.kind": KINDS,
    "transition.to": ("execute", "human_test", "done"),
    "subject.id": KEYS,
    "actor.kind": ("human", "system", "agent"),
    "actor.id": ACTORS,
    "forge.pipeline_status": ("failure", "running", "success"),
    "forge.pr_number": (7, 8),
    "dispatch_hints.eligible_for_worker": (True, False),
}


def conditions(path: str):
    value = st.sampled_from(VALUES[path])
    values = st.lists(value, min_size=1, max_size=3, unique=True)
    return st.one_of(
        value,
        st.none(),
        st.fixed_dictionaries({"in": values}),
        st.fixed_dictionaries({"not": st.one_of(value, st.none())}),
        st.fixed_dictionaries({"not_in": values}),
        st.fixed_dictionaries({"exists": st.booleans()}),
    )


whens = st.lists(st.sampled_from(sorted(VALUES)), max_size=3, unique=True).flatmap(
    lambda paths: st.fixed_dictionaries({path: conditions(path) for path in paths})
)
roles = st.sampled_from(("coder", "fixer", None))
any_rules = st.lists(st.tuples(roles, whens), max_size=4).map(
    lambda rules: [{"name": f"rule_{n}", "role": role, "when": when} for n, (role, when) in enumerate(rules)]
)


def own_ticket(rules: list[tuple[str, str | None, dict]]) -> list[dict]:
    """Rules that never match the same event: each names a ticket of its own."""
    return [
        {"name": f"only_{key[-1].lower()}{n}", "role": role, "when": {**when, "subject.id": key}}
        for n, (key, role, when) in enumerate(rules)
    ]


disjoint_rules = st.lists(st.tuples(st.sampled_from(KEYS), roles, whens), max_size=4, unique_by=lambda r: r[0]).map(
    own_ticket
)


def knobs_with(rules):
    return st.fixed_dictionaries(
        {
            "allowlist": st.lists(st.sampled_from(ACTORS), unique=True),
            "retry_budget": st.integers(min_value=0, max_value=3),
            "fleet_size": st.integers(min_value=1, max_value=2),
            "rules": rules,
        }
    )


events = st.one_of(
    st.tuples(
        st.just("event"),
        st.sampled_from(KINDS),
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
        "first": knobs_with(any_rules),
        "second": knobs_with(disjoint_rules),
        "events": st.lists(events, min_size=1, max_size=25),
        "switch_at": st.integers(min_value=0, max_value=20),
        "order": st.randoms(use_true_random=False),
    }
)


def adopt(api, document) -> None:
    """Make `document` the policy in force, as a person does: from the version they saw."""
    tag = api.get("/api/v1/router/policy").headers["ETag"]
    answer = api.put("/api/v1/router/policy", json={"policy": document, "reason": "the law"}, headers={"If-Match": tag})
    assert answer.status_code == 200, answer.text


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories)
def test_under_the_recorded_policy_a_backtest_flips_nothing(history, app_factory, config_factory, clock):
    from conftest import BASIC, CI_SECRET

    api = ApiClient(app_factory(config_factory()), basic=BASIC, ci_secret=CI_SECRET)
    with connection():
        reset.empty()
    adopt(api, history["first"])
    api.post("/api/v1/initiatives", json={"id": "portfolio", "name": "Portfolio"})
    if history["initiative"] == "active":
        api.patch("/api/v1/initiatives/portfolio", json={"stage": "active"})
    for key, stage in history["tickets"].items():
        api.post("/api/v1/tickets", json={"key": key, "initiative_id": "portfolio", "title": key, "stage": stage})

    accepted = 0
    switched = None
    for index, step in enumerate(history["events"]):
        if index == history["switch_at"]:
            clock.advance(seconds=1)  # what was decided before the change is earlier than it
            adopt(api, history["second"])  # the policy changed while the service runs
            switched = clock()
        kind = step[0]
        if kind == "event":
            _, event_kind, key, actor, to = step
            document = envelope(event_kind, key, actor=actor, to=to if event_kind == "state_changed" else None)
            answer = api.post("/api/v1/events", json=document, auth="ci")
            assert answer.status_code == 202, answer.text
            # The service's own events (from svc, by the system) are no one's decision to judge: not backtested.
            accepted += answer.json["decision"]["outcome"] != "own"
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
    # The second policy's rules in any other order: the same rule for every event, so nothing decided under it
    # flips.
    if switched is not None:
        rules = list(history["second"]["rules"])
        history["order"].shuffle(rules)
        candidate = Policy.from_document({**history["second"], "rules": rules})
        with connection():
            tail = backtest(candidate, since=switched)
        assert tail.flipped == 0, tail.flips
        assert tail.evaluated == tail.unchanged
