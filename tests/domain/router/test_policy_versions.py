"""The router policy's versions (`domain/router/policy_versions.py`): two changes made from the same version at the
same moment never both win, and a process holds a version it has parsed only while that version is in force."""

from __future__ import annotations

import threading

import pytest

from domain.errors import PreconditionFailed
from domain.policy.document import Policy
from domain.policy.in_force import PolicyInForce
from domain.router import policy_versions

pytestmark = pytest.mark.both_backends

THRESHOLDS = policy_versions.Thresholds(days=14, min_settled=20, min_agreement=0.8)


def test_two_changes_from_one_version_at_once_store_one_and_refuse_the_other(app, clock):
    seen = policy_versions.current()
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def change(budget: int) -> None:
        document = {**seen.policy.document(), "retry_budget": budget}
        barrier.wait()
        try:
            outcomes.append(
                policy_versions.adopt(
                    document,
                    reason=f"budget {budget}",
                    force=None,
                    actor="ada",
                    if_match=(seen.tag,),
                    clock=clock,
                    thresholds=THRESHOLDS,
                )
            )
        except PreconditionFailed as refused:
            outcomes.append(refused)

    threads = [threading.Thread(target=change, args=(budget,)) for budget in (3, 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    stored = [o for o in outcomes if isinstance(o, policy_versions.Adoption)]
    refused = [o for o in outcomes if isinstance(o, PreconditionFailed)]
    assert len(stored) == 1 and len(refused) == 1, outcomes
    assert refused[0].current == {"version": stored[0].current.version}
    versions, _ = policy_versions.history(limit=10, cursor=None)
    assert [v.version for v in versions] == [stored[0].current.version, seen.version]


def test_the_policy_in_force_is_read_per_call_and_parsed_once_per_version(app, clock, db_session):
    held = PolicyInForce(Policy(frozenset()))
    first = held()
    assert first.version == policy_versions.current().version  # the app's first policy, as stored
    assert held() is first  # the same version: the parsed policy held
    current = policy_versions.current()
    document = {**current.policy.document(), "fleet_size": 2}
    policy_versions.adopt(
        document, reason="two", force=None, actor="ada", if_match=(current.tag,), clock=clock, thresholds=THRESHOLDS
    )
    second = held()
    assert second is not first and second.fleet_size == 2
    # Back to the first document: a new row, the same version, and an equal policy.
    back = policy_versions.current()
    policy_versions.adopt(
        first.document(),
        reason="one",
        force=None,
        actor="ada",
        if_match=(back.tag,),
        clock=clock,
        thresholds=THRESHOLDS,
    )
    assert held() == first and held().version == first.version


def change(document: dict, reason: str, clock, *, force: str | None = None) -> policy_versions.PolicyVersion:
    current = policy_versions.current()
    return policy_versions.adopt(
        document, reason=reason, force=force, actor="ada", if_match=(current.tag,), clock=clock, thresholds=THRESHOLDS
    ).current


def with_mode(document: dict, name: str, mode: str) -> dict:
    return {**document, "rules": [{**r, "mode": mode} if r["name"] == name else r for r in document["rules"]]}


def test_each_version_keeps_which_version_made_its_live_rules_live_however_many_came_since(app, clock):
    """A rule forced live stays "live without evidence" until it earns it, whatever else changes after: the version
    that made it live is kept with each version as it is stored, not looked for among the last hundred."""
    first = policy_versions.current().policy.document()
    forced = change(with_mode(first, "coder", "live"), "try the coder", clock, force="we watch it by hand")
    for n in range(120):  # other changes, the coder left live as it is
        clock.advance(minutes=1)
        change({**with_mode(first, "coder", "live"), "allowlist": [f"github:person-{n}"]}, f"person {n}", clock)
    current = policy_versions.current()
    standings = {s.rule.name: s for s in policy_versions.standings(current, thresholds=THRESHOLDS, now=clock())}
    assert standings["coder"].made_live_by == forced and standings["coder"].live_without_evidence
    assert standings["fixer"].made_live_by is None and not standings["fixer"].live_without_evidence
    # Back in shadow mode, then live again: the run is broken, and the change that made it live again is the one kept.
    change(with_mode(first, "coder", "shadow"), "pause", clock)
    again = change(with_mode(first, "coder", "live"), "again", clock, force="once more")
    after = change({**with_mode(first, "coder", "live"), "retry_budget": 5}, "budget", clock)
    assert policy_versions.made_live(after) == {"coder": again}


def test_versions_stored_before_it_was_kept_get_it_at_the_next_start(app, clock, config):
    from storage.db import connection, transaction

    first = policy_versions.current().policy.document()
    forced = change(with_mode(first, "coder", "live"), "try the coder", clock, force="by hand")
    later = change({**with_mode(first, "coder", "live"), "fleet_size": 2}, "two bays", clock)
    shadow = change(with_mode(first, "coder", "shadow"), "pause", clock)
    assert [later.live_since, shadow.live_since] == [{later.policy.rules[1].version: forced.id}, {}]
    with connection(), transaction():  # as a database the release before left them
        from storage.db import db

        db.execute_sql('UPDATE "router_policy_version" SET "live_since" = NULL')
    assert policy_versions.current().live_since == {}  # unknown, read as made live by itself
    policy_versions.seed(config, clock)
    with connection():
        versions, _ = policy_versions.history(limit=10, cursor=None)
    assert [v.live_since for v in versions] == [{}, {later.policy.rules[1].version: forced.id}, {}, {}]
