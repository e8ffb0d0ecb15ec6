"""The schema files themselves, and how violations are reported."""

import pytest
from jsonschema import Draft202012Validator

import contracts


@pytest.mark.parametrize("name", contracts.schema_names())
def test_every_schema_is_valid_2020_12_with_a_stable_id(name):
    document = contracts.load(name)
    Draft202012Validator.check_schema(document)
    assert document["$schema"] == contracts.META_SCHEMA
    assert document["$id"] == contracts.BASE_URI + name


def test_every_reference_resolves_offline():
    for name in contracts.schema_names():
        validator = contracts.validator(name)
        # iter_errors walks every $ref reachable from the root for this document shape
        list(validator.iter_errors({}))


def test_violations_are_located_by_json_pointer():
    found = contracts.violations("ticket-create.json", {"key": "bad", "title": "", "surplus": 1})
    assert [v.path for v in found] == ["/initiative_id", "/key", "/surplus", "/title"]
    assert {v.message for v in found if v.path == "/surplus"} == {"is not a known field"}


def test_formats_are_checked():
    assert not contracts.format_checker().conforms("2026-13-40T00:00:00Z", "date-time")
    assert contracts.format_checker().conforms("2026-11-20T08:00:00Z", "date-time")
    assert not contracts.format_checker().conforms("2026-11-20 08:00", "date-time")
    assert not contracts.format_checker().conforms("2026-02-30", "date")


def test_check_raises_with_every_violation():
    with pytest.raises(contracts.ContractViolation) as caught:
        contracts.check("wallet-put.json", {"budget": -1, "spent": "x"})
    assert [v.path for v in caught.value.violations] == ["/budget", "/locked", "/spent"]


# A valid body for each request schema; the test below mutates each into many near misses.
REQUEST_BODIES = {
    "ticket-create.json": {
        "key": "PORT-1",
        "initiative_id": "port",
        "title": "One",
        "stage": "queued",
        "tracker_issue_id": "abc",
    },
    "ticket-move.json": {"to": "execute", "waiting_on": "agent", "reason": "go"},
    "ticket-action.json": {"reason": "done by hand"},
    "initiative-create.json": {"id": "port", "name": "Port", "stage": "active"},
    "initiative-patch.json": {"stage": "done"},
    "slot-claim.json": {"ticket": "PORT-1"},
    "wallet-put.json": {"budget": 100, "spent": 5.5, "locked": False},
    "writing-notify.json": {
        "status": "FAIL_QA",
        "missing": 2,
        "items": [{"date": "2026-11-20", "slug": "x", "title": "X", "url": "https://x.test/x"}],
    },
    "writing-automation-set.json": {"enabled": False},
    "ops-pulse-request.json": {"post_to_chat": "always"},
}
ODD_VALUES = [None, 0, -1, 1.5, "", "x", "2026-02-30", "FAIL_", [], {}, True, "A" * 500, [{"date": "bad"}]]


def _near_misses(document):
    yield document
    for key in list(document):
        yield {k: v for k, v in document.items() if k != key}
        for odd in ODD_VALUES:
            yield {**document, key: odd}
        if isinstance(document[key], list) and document[key]:
            for inner_key in list(document[key][0]):
                for odd in ODD_VALUES:
                    yield {**document, key: [{**document[key][0], inner_key: odd}]}
    yield {**document, "surplus": 1}
    yield []
    yield "text"


@pytest.mark.parametrize("name", sorted(REQUEST_BODIES))
def test_the_compiled_and_the_reference_validator_agree(name):
    reference = contracts.validator(name)
    assert contracts.conforms(name, REQUEST_BODIES[name])
    checked = 0
    for document in _near_misses(REQUEST_BODIES[name]):
        assert contracts.conforms(name, document) == reference.is_valid(document), document
        assert (contracts.violations(name, document) == []) == reference.is_valid(document), document
        checked += 1
    assert checked > 15
