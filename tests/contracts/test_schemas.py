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
    for key, value in document.items():
        if isinstance(value, str):
            # Python's `$` matched before a final line break, and the reference validator used to have the last word.
            for control in ("\n", "\r", "\t", "\x7f", "\x85"):
                yield {**document, key: value + control}
                yield {**document, key: control + value}
    yield {**document, "surplus": 1}
    yield []
    yield "text"


@pytest.mark.parametrize("name", sorted(REQUEST_BODIES))
def test_the_fast_and_the_reference_validator_agree(name):
    reference = contracts.validator(name)
    assert contracts.conforms(name, REQUEST_BODIES[name])
    checked = 0
    for document in _near_misses(REQUEST_BODIES[name]):
        assert contracts.conforms(name, document) == reference.is_valid(document), document
        assert (contracts.violations(name, document) == []) == reference.is_valid(document), document
        checked += 1
    assert checked > 15


@pytest.mark.parametrize("name", contracts.schema_names())
def test_every_schema_builds_on_the_fast_engine_with_every_format_known(name):
    # ignore_unknown_formats=False: a format the engine does not know fails here, not silently at run time.
    assert contracts.compiled(name) is contracts.compiled(name)


# Keywords that only annotate: no engine rejects a document for them.
ANNOTATIONS = {"$schema", "$id", "$comment", "$defs", "title", "description", "default", "examples", "deprecated"}
# For every keyword that asserts something: a schema using it, a document it must refuse and one it must accept.
# The 2020-12 keywords fastjsonschema silently ignored are here whether a contract uses them yet or not.
PROBES = {
    "type": ({"type": "integer"}, 1.5, 2),
    "enum": ({"enum": ["a", "b"]}, "c", "a"),
    "const": ({"const": "a"}, "b", "a"),
    "required": ({"required": ["a"]}, {}, {"a": 1}),
    "properties": ({"properties": {"a": {"type": "string"}}}, {"a": 1}, {"a": "x"}),
    "additionalProperties": ({"properties": {"a": {}}, "additionalProperties": False}, {"b": 1}, {"a": 1}),
    "patternProperties": ({"patternProperties": {"^x": {"type": "integer"}}}, {"xa": "s"}, {"xa": 1}),
    "propertyNames": ({"propertyNames": {"pattern": "^[a-z]+$"}}, {"A": 1}, {"a": 1}),
    "minProperties": ({"minProperties": 1}, {}, {"a": 1}),
    "maxProperties": ({"maxProperties": 1}, {"a": 1, "b": 2}, {"a": 1}),
    "items": ({"items": {"type": "integer"}}, [1, "x"], [1, 2]),
    "prefixItems": ({"prefixItems": [{"type": "integer"}], "items": False}, [1, 2], [1]),
    "minItems": ({"minItems": 1}, [], [1]),
    "maxItems": ({"maxItems": 1}, [1, 2], [1]),
    "uniqueItems": ({"uniqueItems": True}, [1, 1], [1, 2]),
    "contains": ({"contains": {"const": 1}}, [2], [1, 2]),
    "minLength": ({"minLength": 2}, "a", "ab"),
    "maxLength": ({"maxLength": 2}, "abc", "ab"),
    "pattern": ({"pattern": "^[0-9]+$"}, "1a", "12"),
    "format": ({"format": "date"}, "2026-02-30", "2026-02-28"),
    "minimum": ({"minimum": 0}, -1, 0),
    "maximum": ({"maximum": 5}, 6, 5),
    "exclusiveMinimum": ({"exclusiveMinimum": 0}, 0, 1),
    "exclusiveMaximum": ({"exclusiveMaximum": 5}, 5, 4),
    "multipleOf": ({"multipleOf": 2}, 3, 4),
    "allOf": ({"allOf": [{"type": "integer"}, {"minimum": 2}]}, 1, 2),
    "anyOf": ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "x", None),
    "oneOf": ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 1, -1),
    "not": ({"not": {"type": "null"}}, None, 1),
    "if": ({"if": {"const": 1}, "then": {"type": "string"}}, 1, 2),
    "then": ({"if": {"type": "integer"}, "then": {"minimum": 0}}, -1, 1),
    "else": ({"if": {"type": "integer"}, "else": {"type": "string"}}, None, "x"),
    "$ref": ({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"}, "x", 1),
    "dependentRequired": ({"dependentRequired": {"a": ["b"]}}, {"a": 1}, {"a": 1, "b": 2}),
    "dependentSchemas": ({"dependentSchemas": {"a": {"required": ["b"]}}}, {"a": 1}, {"a": 1, "b": 2}),
    "unevaluatedProperties": (
        {"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False},
        {"a": 1, "b": 2},
        {"a": 1},
    ),
    "unevaluatedItems": ({"prefixItems": [{}], "unevaluatedItems": False}, [1, 2], [1]),
    # Our own (contracts.KEYWORDS): both engines enforce it with the same function.
    "x-unique-by": ({"x-unique-by": "name"}, [{"name": "a"}, {"name": "b"}, {"name": "a"}], [{"name": "a"}, {}]),
}
_SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "dependentSchemas"}
_SCHEMA_ONE = {
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
}
_SCHEMA_LISTS = {"allOf", "anyOf", "oneOf", "prefixItems"}


def _keywords(schema, found: set[str]) -> set[str]:
    """Every keyword used in `schema` and its subschemas (property names are not keywords)."""
    if isinstance(schema, dict):
        for keyword, value in schema.items():
            found.add(keyword)
            if keyword in _SCHEMA_MAPS:
                for sub in value.values():
                    _keywords(sub, found)
            elif keyword in _SCHEMA_ONE:
                _keywords(value, found)
            elif keyword in _SCHEMA_LISTS:
                for sub in value:
                    _keywords(sub, found)
    return found


def test_every_keyword_a_contract_uses_is_one_the_fast_engine_is_shown_to_enforce():
    used: set[str] = set()
    for name in contracts.schema_names():
        _keywords(contracts.load(name), used)
    assert "additionalProperties" in used and "if" in used  # the walk reaches into the schemas
    unproven = sorted(used - ANNOTATIONS - set(PROBES))
    assert unproven == [], f"add a probe below for each before a contract relies on it: {unproven}"


@pytest.mark.parametrize("keyword", sorted(PROBES))
def test_the_fast_engine_enforces_each_probed_keyword_as_the_reference_does(keyword):
    import jsonschema_rs

    schema, refused, accepted = PROBES[keyword]
    schema = {"$schema": contracts.META_SCHEMA, **schema}
    # Each engine as `contracts` builds it: with our own keywords, and our formats.
    fast = jsonschema_rs.Draft202012Validator(
        schema,
        validate_formats=True,
        formats=contracts.FORMATS,
        keywords={name: engines[0] for name, engines in contracts.KEYWORDS.items()},
    )
    reference = contracts.reference_class()(schema, format_checker=contracts.format_checker())
    assert (fast.is_valid(refused), reference.is_valid(refused)) == (False, False)
    assert (fast.is_valid(accepted), reference.is_valid(accepted)) == (True, True)


def test_a_lone_surrogate_the_fast_engine_cannot_take_is_judged_by_the_reference():
    # `svc validate` may read such a string from a file (the API refuses it before validation).
    assert contracts.conforms("writing-notify.json", {"status": "FAIL_QA", "items": [{"title": "a\ud800"}]})
    assert not contracts.conforms("writing-notify.json", {"status": "FAIL_\ud800"})
    assert [v.path for v in contracts.violations("writing-notify.json", {"status": "FAIL_\ud800"})] == ["/status"]


def test_our_own_keyword_holds_behind_a_reference_to_another_file_s_root():
    # The reference validator reads each file without its `$schema`, so a `$ref` that lands on a file's root keeps
    # our keywords: the backtest request refers to the candidate policy, which is router-policy.json's root.
    twice = {"rules": [{"name": "a", "role": None, "when": {}}, {"name": "a", "role": None, "when": {}}]}
    for name, document, path in (
        ("router-policy.json", twice, "/rules/1/name"),
        ("router-backtest-request.json", {"policy": twice}, "/policy/rules/1/name"),
        (
            "router-policy-put.json",
            {"policy": {**twice, "allowlist": [], "retry_budget": 2, "fleet_size": 1}, "reason": "x"},
            "/policy/rules/1/name",
        ),
    ):
        assert not contracts.conforms(name, document)
        assert [v.path for v in contracts.violations(name, document)] == [path]


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("^[A-Z][A-Z0-9]*-[A-Z0-9]+$", ["NL-1", "PORT-12"], ["NL-1\n", "NL-1\r\n", "nl-1", "NL-\u0661"]),
        ("^[0-9]{4}$", ["2026"], ["2026\n", "\u0662\u0660\u0662\u0666"]),
        ("^\\d+$", ["12"], ["12\n", "\u0661\u0662"]),
        ("^\\w+$", ["a_1"], ["\u00e9", "a\n"]),
        ("^a.b$", ["a-b"], ["a\nb", "a\nb\n"]),
        ("\\S", ["  x "], ["   ", "", "\n\t"]),
        ("(^/|(^|/)\\.\\.(/|$))", ["/x", "a/..", "../a"], ["a/..b", "a/..\nb"]),
        ("^[^/\\s]+(/[^/\\s]+)+$", ["acme/web"], ["acme/web\n", "acme/ web"]),
    ],
)
def test_a_pattern_means_what_ecma_262_says_in_both_engines(pattern, matching, not_matching):
    import jsonschema_rs

    schema = {"$schema": contracts.META_SCHEMA, "type": "string", "pattern": pattern}
    fast = jsonschema_rs.Draft202012Validator(schema)
    reference = contracts.reference_class()(schema, format_checker=contracts.format_checker())
    for text in matching:
        assert (fast.is_valid(text), reference.is_valid(text)) == (True, True), text
    for text in not_matching:
        assert (fast.is_valid(text), reference.is_valid(text)) == (False, False), text


@pytest.mark.parametrize(
    ("name", "document", "path"),
    [
        ("ticket-create.json", {"key": "NL-1\n", "initiative_id": "nl", "title": "x"}, "/key"),
        ("initiative-create.json", {"id": "nl\n", "name": "NL"}, "/id"),
        ("dispatch-claim.json", {"bay": "bay-1\n"}, "/bay"),
        ("slot-claim.json", {"ticket": "NL-1\n"}, "/ticket"),
    ],
)
def test_an_identifier_with_a_trailing_line_break_is_refused_with_its_pointer(name, document, path):
    assert [v.path for v in contracts.violations(name, document)] == [path]


def test_no_validator_overrules_a_stricter_one_s_refusal(monkeypatch):
    # Should the reference validator ever find nothing wrong with what the fast one refuses, the refusal stands,
    # in the fast engine's words, each with its pointer.
    monkeypatch.setattr(contracts, "explain", lambda name, document: [])
    found = contracts.violations("ticket-create.json", {"key": "nope", "initiative_id": "nl", "title": "x"})
    assert [v.path for v in found] == ["/key"]
    with pytest.raises(contracts.ContractViolation):
        contracts.check("ticket-create.json", {"key": "nope", "initiative_id": "nl", "title": "x"})
