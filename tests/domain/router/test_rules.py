"""The policy's rules compiled to predicates: what each matcher means, by JSON's equality, and which rule is the
event's (the first whose every condition holds)."""

from __future__ import annotations

import pytest

from domain.policy.document import Policy
from domain.policy.rules import Rule, compile_when, first_match, version_of, when_words

from router_kit import envelope


def matches(when: dict, document: dict) -> bool:
    return compile_when(when)(document)


def with_hints(**hints) -> dict:
    document = envelope("state_changed", "PORT-1")
    document["dispatch_hints"] = {"eligible_for_worker": True, **hints}
    return document


def test_a_scalar_matches_by_json_equality_never_true_for_one():
    number = envelope("pipeline_failed", "PORT-1")  # forge.pr_number is 7
    assert matches({"forge.pr_number": 7}, number) and matches({"forge.pr_number": 7.0}, number)
    assert not matches({"forge.pr_number": "7"}, number)
    eligible = with_hints()
    assert matches({"dispatch_hints.eligible_for_worker": True}, eligible)
    assert not matches({"dispatch_hints.eligible_for_worker": 1}, eligible)
    one = envelope("pipeline_failed", "PORT-1")
    one["forge"]["pr_number"] = 1
    assert not matches({"forge.pr_number": True}, one) and matches({"forge.pr_number": 1}, one)
    assert not matches({"forge.pr_number": {"in": [True, "1"]}}, one)
    assert matches({"forge.pr_number": {"in": [True, 1.0]}}, one)


def test_an_absent_path_reads_as_null():
    document = with_hints()  # no blocked_reason, no forge at all
    assert matches({"dispatch_hints.blocked_reason": None}, document)
    assert matches({"forge.branch": None}, document)
    assert not matches({"forge.branch": "main"}, document)
    assert matches({"forge.branch": {"not": "main"}}, document)  # not and not_in match what is absent
    assert matches({"forge.branch": {"not_in": ["main", "dev"]}}, document)
    assert not matches({"forge.branch": {"in": ["main"]}}, document)
    assert matches({"forge.branch": {"exists": False}}, document)
    assert not matches({"forge.branch": {"exists": True}}, document)


def test_exists_false_matches_null_as_well_as_absent():
    document = with_hints(blocked_reason=None)
    assert matches({"dispatch_hints.blocked_reason": {"exists": False}}, document)
    document["dispatch_hints"]["blocked_reason"] = "await_ci"
    assert matches({"dispatch_hints.blocked_reason": {"exists": True}}, document)
    assert not matches({"dispatch_hints.blocked_reason": {"not": "await_ci"}}, document)
    assert matches({"dispatch_hints.blocked_reason": {"not_in": ["later"]}}, document)


def test_contains_matches_the_actor_s_roles_and_absent_roles_are_empty():
    document = envelope("state_changed", "PORT-1")
    document["actor"]["roles"] = ["pm", "coder"]
    assert matches({"actor.roles": {"contains": "pm"}}, document)
    assert not matches({"actor.roles": {"contains": "ops"}}, document)
    del document["actor"]["roles"]
    assert not matches({"actor.roles": {"contains": "pm"}}, document)


def test_an_empty_when_matches_every_event_and_every_condition_must_hold():
    document = envelope("pipeline_failed", "PORT-1")
    assert matches({}, document)
    assert matches({"source": "ci", "transition.kind": "pipeline_failed"}, document)
    assert not matches({"source": "ci", "transition.kind": "pipeline_passed"}, document)


def test_the_first_rule_that_matches_is_the_event_s():
    rules = [
        Rule.from_document({"name": "quiet", "role": None, "when": {"subject.id": "PORT-9"}}),
        Rule.from_document({"name": "anything", "role": "coder", "when": {}}),
        Rule.from_document({"name": "never", "role": "fixer", "when": {}}),
    ]
    assert first_match(rules, envelope("opened", "PORT-9")).name == "quiet"
    assert first_match(rules, envelope("opened", "PORT-1")).name == "anything"
    assert first_match([], envelope("opened", "PORT-1")) is None
    assert rules[1].mode == "shadow"  # left out, a rule is in shadow mode


def test_versions_are_hashes_of_the_canonical_document():
    policy = Policy(frozenset({"b", "a"}))
    same = Policy.from_document({**policy.document(), "allowlist": ["a", "b"]})
    assert policy.version == same.version and len(policy.version) == 12
    assert version_of({"b": 1, "a": [1, 2]}) == version_of({"a": [1, 2], "b": 1})
    live = Policy.from_document(
        {**policy.document(), "rules": [{**r, "mode": "live"} for r in policy.document()["rules"]]}
    )
    assert live.version != policy.version and live.rule_versions() == policy.rule_versions()


@pytest.mark.parametrize(
    ("when", "words"),
    [
        (
            {
                "actor.kind": {"not": "untrusted_comment"},
                "dispatch_hints.eligible_for_worker": True,
                "transition.to": "execute",
                "transition.kind": "state_changed",
            },
            "transition kind is state_changed, to is execute, actor kind is not untrusted_comment, "
            "eligible for a worker is true",
        ),
        ({}, "every event"),
        (
            {"source": {"in": ["ci", "forge"]}, "forge.branch": {"exists": False}},
            "source is one of ci, forge, branch is absent",
        ),
        (
            {"actor.roles": {"contains": "pm"}, "actor.id": {"not_in": ["a", "b"]}},
            "actor is none of a, b, actor roles include pm",
        ),
    ],
)
def test_a_when_in_words(when, words):
    assert when_words(when) == words
