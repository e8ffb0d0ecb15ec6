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
