"""The router policy's versions (`domain/router/policy_versions.py`): two changes made from the same version at the
same moment never both win, and a process holds a version it has parsed only while that version is in force."""

from __future__ import annotations

import threading

from domain.errors import PreconditionFailed
from domain.policy.document import Policy
from domain.policy.in_force import PolicyInForce
from domain.router import policy_versions

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
