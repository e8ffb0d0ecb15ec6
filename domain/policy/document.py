"""The router's policy as data: one document (`contracts/router-policy.json`) holding the gates' knobs (`allowlist`,
`retry_budget`, `fleet_size`) and the rules, in order. A `Policy` is that document parsed once, its rules compiled
(`domain/policy/rules.py`); every decision records the policy it was taken under (`as_dict`, with its `version`).

The first policy is the contract's example: the three rules the router has always had (wait for CI, the coder, the
fixer), every one in shadow mode, with the allowlist and retry budget of the environment (`from_config`). Which
policy is in force, and its history, is the database's (`domain/router/policy_versions.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from domain.config import Config
from domain.policy.rules import SHADOW, Envelope, Rule, first_match, version_of

FLEET_SIZE = 1
MAX_RULES = 100  # contracts/router-policy.json says the same (`$defs/rules`, maxItems)

# The contract's example document's rules: what the router matched before its rules were data.
FIRST_RULES: tuple[dict[str, Any], ...] = (
    {"name": "wait_for_ci", "role": None, "mode": SHADOW, "when": {"dispatch_hints.blocked_reason": "await_ci"}},
    {
        "name": "coder",
        "role": "coder",
        "mode": SHADOW,
        "when": {
            "transition.kind": "state_changed",
            "transition.to": "execute",
            "dispatch_hints.eligible_for_worker": True,
            "actor.kind": {"not": "untrusted_comment"},
        },
    },
    {"name": "fixer", "role": "fixer", "mode": SHADOW, "when": {"transition.kind": "pipeline_failed"}},
)


def compile_rules(documents: Iterable[Mapping[str, Any]]) -> tuple[Rule, ...]:
    return tuple(Rule.from_document(dict(document)) for document in documents)


@dataclass(frozen=True)
class Policy:
    """The knobs of the gates and the rules, parsed and compiled once. `svc replay` and `svc backtest` change it
    (`changed`) to try a candidate on recorded history."""

    allowlist: frozenset[str]
    retry_budget: int = 2
    fleet_size: int = FLEET_SIZE
    # Left out: the first policy's three rules.
    rules: tuple[Rule, ...] = field(default_factory=lambda: compile_rules(FIRST_RULES))

    @classmethod
    def from_config(cls, config: Config) -> Policy:
        """The first policy: the contract's three rules, the environment's allowlist and retry budget."""
        return cls(allowlist=config.router_allowlist, retry_budget=config.retry_budget_per_day)

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Policy:
        """A whole document, or a recorded one (`as_dict`'s shape, its version derived, never trusted). A recorded
        policy without `rules` was taken before the rules were data: under the first policy's three."""
        return cls(
            allowlist=frozenset(document["allowlist"]),
            retry_budget=int(document["retry_budget"]),
            fleet_size=int(document["fleet_size"]),
            rules=compile_rules(document.get("rules", FIRST_RULES)),
        )

    # The recorded shape reads the same way.
    from_dict = from_document

    def changed(
        self,
        *,
        allowlist: Iterable[str] | None = None,
        retry_budget: int | None = None,
        fleet_size: int | None = None,
        rules: Iterable[Mapping[str, Any]] | None = None,
    ) -> Policy:
        """This policy with the members given (not None) replaced: a candidate (a partial document, as
        `svc backtest --policy` and `POST router/backtest` take one)."""
        members: dict[str, Any] = {}
        if allowlist is not None:
            members["allowlist"] = frozenset(allowlist)
        if retry_budget is not None:
            members["retry_budget"] = retry_budget
        if fleet_size is not None:
            members["fleet_size"] = fleet_size
        if rules is not None:
            members["rules"] = compile_rules(rules)
        return replace(self, **members)

    def first_match(self, envelope: Envelope) -> Rule | None:
        """The event's rule: the first whose every condition holds, or None."""
        return first_match(self.rules, envelope)

    def document(self) -> dict[str, Any]:
        """The canonical document: the allowlist sorted, every rule's mode written out."""
        return {
            "allowlist": sorted(self.allowlist),
            "retry_budget": self.retry_budget,
            "fleet_size": self.fleet_size,
            "rules": [rule.as_dict() for rule in self.rules],
        }

    def knobs(self) -> dict[str, Any]:
        return {"allowlist": sorted(self.allowlist), "retry_budget": self.retry_budget, "fleet_size": self.fleet_size}

    @cached_property
    def version(self) -> str:
        """Twelve hex digits of the sha256 of the canonical document: equal policies, equal versions."""
        return version_of(self.document())

    @cached_property
    def recorded(self) -> dict[str, Any]:
        """What a decision records: the document with its version (worked out once; never changed)."""
        return {"version": self.version, **self.document()}

    def as_dict(self) -> dict[str, Any]:
        return dict(self.recorded)

    def rule_versions(self) -> dict[str, str]:
        """Each rule's version (of its name, role and `when`), by name."""
        return {rule.name: rule.version for rule in self.rules}

    def live_rules(self) -> tuple[Rule, ...]:
        return tuple(rule for rule in self.rules if rule.mode != SHADOW)
