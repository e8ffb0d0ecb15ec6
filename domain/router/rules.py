"""The seed's rule shapes, as plain ordered Python rules (no expression language): the first that matches says
what live mode would do. A rule with no role means "wait": no dispatch even when every gate passes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Envelope = dict[str, Any]


@dataclass(frozen=True)
class Rule:
    name: str
    role: str | None
    matches: Callable[[Envelope], bool]


def awaits_ci(envelope: Envelope) -> bool:
    """New commits on a PR whose pipeline has not passed: wait for `pipeline_passed`, do not re-dispatch."""
    return envelope["dispatch_hints"].get("blocked_reason") == "await_ci"


def coder_on_execute(envelope: Envelope) -> bool:
    """A ticket moved to `execute`, eligible for a worker, by an actor that is not an untrusted comment."""
    transition = envelope["transition"]
    return (
        transition["kind"] == "state_changed"
        and transition.get("to") == "execute"
        and envelope["dispatch_hints"]["eligible_for_worker"] is True
        and envelope["actor"]["kind"] != "untrusted_comment"
    )


def fixer_on_pipeline_failed(envelope: Envelope) -> bool:
    """A red pipeline: the fixer, once, within the retry budget (the `retry_budget` gate counts)."""
    return envelope["transition"]["kind"] == "pipeline_failed"


RULES: tuple[Rule, ...] = (
    Rule("wait_for_ci", None, awaits_ci),
    Rule("coder", "coder", coder_on_execute),
    Rule("fixer", "fixer", fixer_on_pipeline_failed),
)


def first_match(envelope: Envelope) -> Rule | None:
    for rule in RULES:  # a loop, not next() over a generator: every event and replayed line asks
        if rule.matches(envelope):
            return rule
    return None
