"""The policy's rules, compiled: each rule's `when` (envelope paths and their conditions, as
`contracts/router-policy.json` shapes them) made once into a plain Python predicate over an envelope. Declarative
matches only: there is no expression language, nothing is evaluated, and a condition can do nothing but compare
what is at its path with what it names.

What a condition means (the schema's description says the same):

- a path that is absent reads as null (`actor.roles` as `[]`);
- a scalar matches a value equal to it, by JSON's equality: `true` never equals `1`, and `1` equals `1.0`;
- `in` matches a value equal to one of its scalars; `not` and `not_in` the contrary (so an absent value matches);
- `exists: true` matches a value that is present and not null, `exists: false` one that is absent or null;
- `contains` (only for `actor.roles`) matches when the roles hold it.

The first rule whose every condition holds is the event's rule (`first_match`); an empty `when` holds for every
event.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

Envelope = dict[str, Any]
Predicate = Callable[[Envelope], bool]

SHADOW, LIVE = "shadow", "live"
ROLES_PATH = "actor.roles"


def version_of(document: Any) -> str:
    """Twelve hex digits of the sha256 of the canonical JSON of `document` (keys sorted, no spaces)."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Rule:
    """One rule of a policy: its `when` compiled into `matches`."""

    name: str
    role: str | None
    mode: str
    when: dict[str, Any]
    matches: Predicate = field(compare=False, repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Rule:
        """A rule as the schema shapes it (already checked); `mode` defaults to shadow."""
        when = document["when"]
        return cls(document["name"], document["role"], document.get("mode", SHADOW), when, compile_when(when))

    @cached_property
    def version(self) -> str:
        """The rule's version: of its name, role and `when`, not its mode (a rule made live is the same rule)."""
        return version_of({"name": self.name, "role": self.role, "when": self.when})

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "mode": self.mode, "when": self.when}


def first_match(rules: Sequence[Rule], envelope: Envelope) -> Rule | None:
    for rule in rules:  # a loop, not next() over a generator: every event and replayed line asks
        if rule.matches(envelope):
            return rule
    return None


# -- compiling ---------------------------------------------------------------------------------------------------


def compile_when(when: dict[str, Any]) -> Predicate:
    """The predicate of a `when`: every condition holds (none: every envelope)."""
    checks = tuple(_condition(path, condition) for path, condition in when.items())
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]

    def every(envelope: Envelope) -> bool:
        # A loop, not all() over a generator: every event asks.
        for check in checks:  # noqa: SIM110
            if not check(envelope):
                return False
        return True

    return every


def _always(envelope: Envelope) -> bool:
    return True


def _reader(path: str) -> Callable[[Envelope], Any]:
    """What is at `path` in an envelope (`source`, or `part.member`), None when absent."""
    if "." not in path:
        return lambda envelope: envelope.get(path)
    part, member = path.split(".", 1)

    def read(envelope: Envelope) -> Any:
        found = envelope.get(part)
        return found.get(member) if isinstance(found, dict) else None

    return read


def _condition(path: str, condition: Any) -> Predicate:
    read = _reader(path)
    if path == ROLES_PATH:
        role = condition["contains"]
        return lambda envelope: role in (read(envelope) or ())
    if not isinstance(condition, dict):
        equal = _equal_to(condition)
        return lambda envelope: equal(read(envelope))
    ((matcher, value),) = condition.items()
    if matcher == "in":
        one_of = _one_of(value)
        return lambda envelope: one_of(read(envelope))
    if matcher == "not_in":
        one_of = _one_of(value)
        return lambda envelope: not one_of(read(envelope))
    if matcher == "not":
        equal = _equal_to(value)
        return lambda envelope: not equal(read(envelope))
    if matcher == "exists":
        if value:
            return lambda envelope: read(envelope) is not None
        return lambda envelope: read(envelope) is None
    raise ValueError(f"{path}: unknown matcher {matcher!r}")  # the schema admits none other


def _kind(value: Any) -> type:
    """The JSON kind of a scalar: booleans apart from numbers (Python's `True == 1`), integers with floats."""
    if isinstance(value, bool):
        return bool
    if isinstance(value, int | float):
        return float
    return type(value)


def _equal_to(expected: Any) -> Callable[[Any], bool]:
    """JSON equality with a scalar: the same kind and equal."""
    if expected is None:
        return lambda value: value is None
    if isinstance(expected, bool):
        return lambda value: value is expected
    if isinstance(expected, str):
        return lambda value: type(value) is str and value == expected
    # A number: any number but a boolean, equal to it.
    return lambda value: not isinstance(value, bool) and isinstance(value, int | float) and value == expected


def _one_of(expected: Sequence[Any]) -> Callable[[Any], bool]:
    """Equal (JSON equality) to one of `expected`; looked up by (kind, value) so `true` never finds `1`."""
    wanted = frozenset((_kind(v), v) for v in expected)
    return lambda value: (_kind(value), value) in wanted if _hashable(value) else False


def _hashable(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


# -- in words ----------------------------------------------------------------------------------------------------

# Each envelope path as a person reads it (the board and `svc policy show` say a rule's `when` with these).
PATH_WORDS = {
    "source": "source",
    "transition.kind": "transition kind",
    "transition.from": "from",
    "transition.to": "to",
    "subject.type": "subject type",
    "subject.id": "subject",
    "subject.initiative_id": "initiative",
    "subject.tracker_issue_id": "tracker issue",
    "subject.repo": "repository",
    "actor.kind": "actor kind",
    "actor.id": "actor",
    "actor.roles": "actor roles",
    "forge.pr_number": "pull request",
    "forge.branch": "branch",
    "forge.pipeline_id": "pipeline",
    "forge.pipeline_status": "pipeline status",
    "forge.head_sha": "head commit",
    "forge.merge_commit_sha": "merge commit",
    "dispatch_hints.eligible_for_worker": "eligible for a worker",
    "dispatch_hints.blocked_reason": "blocked reason",
    "dispatch_hints.suggested_role": "suggested role",
}


def _scalar_words(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, str) and (not value or value != value.strip()) else str(value)


def condition_words(path: str, condition: Any) -> str:
    """One condition in words: "transition kind is state_changed", "actor kind is not untrusted_comment"."""
    subject = PATH_WORDS.get(path, path)
    if not isinstance(condition, dict):
        return f"{subject} is absent" if condition is None else f"{subject} is {_scalar_words(condition)}"
    ((matcher, value),) = condition.items()
    if matcher == "in":
        return f"{subject} is one of {', '.join(_scalar_words(v) for v in value)}"
    if matcher == "not_in":
        return f"{subject} is none of {', '.join(_scalar_words(v) for v in value)}"
    if matcher == "not":
        return f"{subject} is present" if value is None else f"{subject} is not {_scalar_words(value)}"
    if matcher == "exists":
        return f"{subject} is present" if value else f"{subject} is absent"
    return f"{subject} include {_scalar_words(value)}"  # contains


def when_words(when: dict[str, Any]) -> str:
    """A rule's `when` in words, its conditions in the envelope's order (they all must hold, so the order is only
    for reading); an empty one: every event."""
    if not when:
        return "every event"
    order = list(PATH_WORDS)
    paths = sorted(when, key=lambda path: order.index(path) if path in order else len(order))
    return ", ".join(condition_words(path, when[path]) for path in paths)
