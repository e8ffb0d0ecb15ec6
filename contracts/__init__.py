"""JSON Schema contracts: every request body, the response shapes, and the normalized event envelope.

Each schema is a file in this folder with `$schema` 2020-12 and the stable `$id` `BASE_URI + <file name>`.
They are loaded once into a `referencing.Registry` (references between files resolve there, never over
the network) and each validator is built once, with format checking on.

Two validators are built from each file, both from the same documents and the same `$id`s, both checking
formats with the same functions. A fast one (jsonschema-rs: all of 2020-12, compiled in Rust) decides, on every
request, whether a document conforms; only when it does not is the reference validator (jsonschema) asked for
the violations, each located by JSON pointer. Neither overrules the other's refusal: a document the fast engine
refuses is refused, with the fast engine's own words where the reference one finds nothing to say. Tests hold the
two to the same verdict on every example and near miss, and refuse a contract that uses a keyword the fast engine is
not shown to enforce.

A `pattern` means what JSON Schema says it means, an ECMA-262 regular expression, in both engines. Python's `re`
reads some of its signs otherwise (`$` also matches before a final line break, so `"NL-1\\n"` passed
`^[A-Z][A-Z0-9]*-[A-Z0-9]+$`; `\\d` takes any script's digits): the reference engine
reads each pattern through `ecma_pattern`, which writes those signs the way `re` reads them as ECMA-262 does.

A name may point into a file (`router-policy.json#/$defs/document`): the part of the schema there, with the file's
own references. One keyword is our own, for what JSON Schema cannot say, and both engines enforce it with the same
function (`KEYWORDS`): `x-unique-by: "name"` on an array, no two of whose items may share that member's value.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from datetime import date
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import jsonschema_rs

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, FormatChecker
    from referencing import Registry

# The reference validator (jsonschema, with referencing) is imported when it is first needed, to explain a
# document that failed or by a test: a process that only ever sees conforming documents (every `svc` command
# starts with this module) never pays the tenth of a second its import costs.

BASE_URI = "https://svc.invalid/contracts/"
META_SCHEMA = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class Violation:
    """One reason a document breaks its contract, located by a JSON pointer into the document."""

    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


class ContractViolation(Exception):
    """A document failed its schema; `violations` holds one entry per failure."""

    def __init__(self, schema: str, violations: list[Violation]):
        self.schema = schema
        self.violations = violations
        super().__init__(f"{schema}: " + "; ".join(f"{v.path or '/'}: {v.message}" for v in violations))


def schema_names() -> list[str]:
    """Every schema file name shipped in this package."""
    return sorted(entry.name for entry in resources.files(__name__).iterdir() if entry.name.endswith(".json"))


@functools.cache
def load(name: str) -> dict[str, Any]:
    """The parsed schema document `name` (for example `ticket-create.json`)."""
    return json.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))


def part(name: str, pointer: str) -> Any:
    """The part of schema `name` at JSON pointer `pointer`, for code that must state what the contract states:
    `part("normalized-event.json", "/$defs/kind")["enum"]` is the envelope's transition kinds."""
    node = load(name)
    for step in pointer.split("/")[1:]:  # "" is the whole schema
        node = node[step.replace("~1", "/").replace("~0", "~")]
    return node


@functools.cache
def registry() -> Registry:
    """All schemas, keyed by their `$id`. There is no retrieve hook, so an unknown `$ref` fails loudly."""
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    pairs = []
    for name in schema_names():
        document = load(name)
        # Each file is read as 2020-12 without its `$schema`: jsonschema picks the validator class of a `$ref`'s
        # target by the `$schema` it declares, which would be the plain 2020-12 class, without our own keywords
        # (`reference_class`), wherever a reference lands on a file's root.
        contents = {key: value for key, value in document.items() if key != "$schema"}
        pairs.append((document["$id"], Resource.from_contents(contents, default_specification=DRAFT202012)))
    return Registry().with_resources(pairs)


# RFC 3339's date-time and full-date (section 5.6), read field by field: the service's one ISO time reader is
# `integrations/timestamps.py`, which this folder may not import, and a format check needs only the fields and the
# calendar. Seconds are required and a leap second (60) refused, as the service never writes one.
_DATE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))\Z", re.ASCII
)
_FULL_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\Z", re.ASCII)


def _on_the_calendar(year: str, month: str, day: str) -> bool:
    try:
        date(int(year), int(month), int(day))
    except ValueError:
        return False
    return True


def _rfc3339_datetime(value: object) -> bool:
    if not isinstance(value, str):
        return True
    found = _DATE_TIME.match(value)
    if found is None:
        return False
    year, month, day, hour, minute, second, offset_hours, offset_minutes = found.groups()
    if int(hour) > 23 or int(minute) > 59 or int(second) > 59:
        return False
    if offset_hours is not None and (int(offset_hours) > 23 or int(offset_minutes) > 59):
        return False
    return _on_the_calendar(year, month, day)


def _uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(parts.scheme) and (bool(parts.netloc) or parts.scheme in {"urn", "mailto"})


def _date(value: object) -> bool:
    if not isinstance(value, str):
        return True
    found = _FULL_DATE.match(value)
    return found is not None and _on_the_calendar(*found.groups())


# The formats both validators check, with the same functions, so they cannot disagree about them.
FORMATS = {"date-time": _rfc3339_datetime, "date": _date, "uri": _uri}


@functools.cache
def format_checker() -> FormatChecker:
    """The standard checker with our `date-time`, `date` and `uri` (jsonschema checks some only with extras)."""
    from jsonschema import FormatChecker

    checker = FormatChecker()
    for name, check in FORMATS.items():
        checker.checks(name)(check)
    return checker


def _refuse_fetch(uri: str) -> Any:
    """The fast engine's retriever: every contract is in its registry already, so any other `$ref` is a mistake."""
    raise ValueError(f"refusing to fetch {uri}: contracts reference only each other")


@functools.cache
def fast_registry() -> jsonschema_rs.Registry:
    """Every schema keyed by its `$id`, for the fast engine (the same documents as `registry()`)."""
    resources = [(load(name)["$id"], load(name)) for name in schema_names()]
    return jsonschema_rs.Registry(resources, draft=jsonschema_rs.Draft202012, retriever=_refuse_fetch)


def _schema_of(name: str) -> dict[str, Any]:
    """The schema `name` names: a whole file, or (`file.json#/$defs/x`) the part of it there, by reference."""
    if "#" not in name:
        return load(name)
    return {"$schema": META_SCHEMA, "$ref": BASE_URI + name}


def repeats(member: str, items: Any) -> list[tuple[int, int]]:
    """`x-unique-by`: (index, index of the first item with the same value) of every item whose `member` repeats
    an earlier item's (JSON equality: `true` is not `1`)."""
    if not isinstance(items, list):
        return []
    first: dict[str, int] = {}
    found = []
    for index, item in enumerate(items):
        if isinstance(item, dict) and member in item:
            key = json.dumps(item[member], sort_keys=True)
            if key in first:
                found.append((index, first[key]))
            else:
                first[key] = index
    return found


class _FastUniqueBy:
    """`x-unique-by` for the fast engine (its custom keyword protocol): the verdict only."""

    def __init__(self, parent_schema: dict[str, Any], value: Any, schema_path: list[str | int]) -> None:
        self.member = value

    def validate(self, instance: Any) -> None:
        found = repeats(self.member, instance)
        if found:
            raise ValueError(f"{len(found)} item(s) repeat the {self.member} of an earlier one")


def _reference_unique_by(validator, member, instance, schema):
    """`x-unique-by` for the reference validator: one error per repeat, at its own member."""
    from jsonschema import ValidationError

    for index, earlier in repeats(member, instance):
        yield ValidationError(
            f"{instance[index][member]!r} is already the {member} of item {earlier}", path=(index, member)
        )


# Our own keywords, each enforced by both engines with one function.
KEYWORDS = {"x-unique-by": (_FastUniqueBy, _reference_unique_by)}

# ECMA-262's signs that Python's `re` reads otherwise, written as `re` must read them to mean what ECMA-262 means:
# outside a character class, and (the digit and word classes) inside one.
# (`.` is left alone: ECMA-262's takes no carriage return, but the fast engine's takes one as `re`'s does, and the two
# engines agreeing matters more; no contract writes a bare `.`.)
_ECMA_OUTSIDE = {"$": r"\Z"}  # the end of the text; `re`'s `$` also matches before a final line break
_ECMA_ESCAPES_OUTSIDE = {"d": "[0-9]", "D": "[^0-9]", "w": "[A-Za-z0-9_]", "W": "[^A-Za-z0-9_]"}
_ECMA_ESCAPES_INSIDE = {"d": "0-9", "w": "A-Za-z0-9_"}


def ecma_pattern(pattern: str) -> str:
    """`pattern`, an ECMA-262 regular expression (what JSON Schema's `pattern` is), as a Python `re` pattern that
    matches the same texts: `$` is the end of the text, `\\d` and `\\w` ASCII alone (as in
    ECMA-262, and in the fast engine). What both read alike is left as it is. (ECMA-262's `[]` and `[^]`, which
    `re` reads otherwise, are not translated: no contract writes them.)"""
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            escaped = pattern[index + 1]
            table = _ECMA_ESCAPES_INSIDE if in_class else _ECMA_ESCAPES_OUTSIDE
            out.append(table.get(escaped, char + escaped))
            index += 2
            continue
        if in_class:
            in_class = char != "]"
            out.append(char)
        else:
            in_class = char == "["
            out.append(_ECMA_OUTSIDE.get(char, char))
        index += 1
    return "".join(out)


def _reference_pattern(validator, pattern, instance, schema):
    """`pattern` for the reference validator, read as ECMA-262 (`ecma_pattern`), as JSON Schema means it."""
    from jsonschema import ValidationError

    # `re` keeps the patterns it compiled; this runs only to explain a refused document.
    if validator.is_type(instance, "string") and not re.search(ecma_pattern(pattern), instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@functools.cache
def compiled(name: str) -> jsonschema_rs.Draft202012Validator:
    """The fast validator for schema `name`, built once: formats checked with `FORMATS`, an unknown format an
    error when it is built (never silently unchecked), no `$ref` fetched from anywhere."""
    return jsonschema_rs.Draft202012Validator(
        _schema_of(name),
        registry=fast_registry(),
        retriever=_refuse_fetch,
        validate_formats=True,
        formats=FORMATS,
        ignore_unknown_formats=False,
        keywords={keyword: fast for keyword, (fast, _) in KEYWORDS.items()},
    )


def conforms(name: str, document: Any) -> bool:
    """The fast validator's verdict alone: the hot path's yes/no. It never changes the document."""
    try:
        return compiled(name).is_valid(document)
    except UnicodeEncodeError:
        # A string with a lone surrogate (JSON's "\\ud800") cannot cross into Rust; the API refuses such bodies
        # before validation (api/body.py), but a file given to `svc validate` may hold one.
        return validator(name).is_valid(document)


@functools.cache
def reference_class() -> type[Draft202012Validator]:
    """jsonschema's 2020-12 validator with our own keywords (`KEYWORDS`)."""
    from jsonschema import Draft202012Validator, validators

    own = {k: reference for k, (_, reference) in KEYWORDS.items()}
    return validators.extend(Draft202012Validator, {**own, "pattern": _reference_pattern})


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """The validator for schema `name`, built once."""
    return reference_class()(_schema_of(name), registry=registry(), format_checker=format_checker())


def _pointer(parts) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def violations(name: str, document: Any) -> list[Violation]:
    """Every way `document` breaks schema `name`, in document order; empty when it conforms."""
    if conforms(name, document):
        return []
    # The reference validator explains; it never overrules the fast one's refusal. Should it find nothing (the two
    # agree on every example and near miss the tests try, so this is a bug of one of them), the fast engine's own
    # words refuse the document: a validator more lenient than another is never the last word.
    return explain(name, document) or _fast_explanation(name, document)


def _fast_explanation(name: str, document: Any) -> list[Violation]:
    """The fast validator's violations of schema `name`, each with its JSON pointer: the refusal that stands when the
    reference validator finds nothing wrong."""
    try:
        errors = compiled(name).iter_errors(document)
        found = [Violation(_pointer(error.instance_path), error.message) for error in errors]
    except UnicodeEncodeError:
        found = []
    return sorted(set(found), key=lambda v: (v.path, v.message)) or [Violation("", "does not conform to its schema")]


def explain(name: str, document: Any) -> list[Violation]:
    """The reference validator's violations of schema `name`, each with its JSON pointer (slower)."""
    found: list[Violation] = []
    for error in validator(name).iter_errors(document):
        found.extend(_explain(error))
    # `required` reports each missing member separately but names all of them; keep one entry per violation.
    return sorted(set(found), key=lambda v: (v.path, v.message))


def _explain(error) -> list[Violation]:
    path = list(error.absolute_path)
    if error.validator == "required":
        # Point at the member that is missing, not at its parent.
        missing = [p for p in error.validator_value if isinstance(error.instance, dict) and p not in error.instance]
        return [Violation(_pointer([*path, m]), "is required") for m in missing]
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extras = [k for k in error.instance if k not in allowed]
        return [Violation(_pointer([*path, k]), "is not a known field") for k in extras]
    if error.validator in {"anyOf", "oneOf"} and error.context:
        # Report the alternative that got furthest, which is what a person fixing the document needs.
        deepest = max(error.context, key=lambda e: len(e.absolute_path))
        return _explain(deepest)
    message = error.message
    if error.validator == "pattern" and isinstance(error.schema, dict) and error.schema.get("description"):
        # A regular expression is no answer for a person: say the form in the words the schema gives it.
        message = f"{error.instance!r} is not in the expected form: {error.schema['description']}"
    if error.validator == "const" and isinstance(error.validator_value, str):
        message = f"must be {error.validator_value!r}"
    if error.validator in _COUNTED and isinstance(error.instance, list | dict):
        # The count, not the document: a list of 101 rules is no message for a person.
        kind, limit = _COUNTED[error.validator]
        noun = "items" if isinstance(error.instance, list) else "members"
        message = f"has {len(error.instance)} {noun}; {limit} {error.validator_value} {kind}"
    return [Violation(_pointer(path), message)]


_COUNTED = {
    "maxItems": ("allowed", "at most"),
    "minItems": ("needed", "at least"),
    "maxProperties": ("allowed", "at most"),
    "minProperties": ("needed", "at least"),
}


def check(name: str, document: Any) -> Any:
    """Return `document` if it conforms to schema `name`, else raise `ContractViolation`."""
    found = violations(name, document)
    if found:
        raise ContractViolation(name, found)
    return document
