"""Evaluating one valid envelope under a policy: its rules, then every gate; the outcome says what live mode would
do."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain.router.board_view import BoardView
from domain.router.gates import GATES, GateInput
from domain.router.policy import Policy
from domain.router.rules import Rule

WOULD_DISPATCH, BLOCKED, NO_ACTION, REJECTED = "would_dispatch", "blocked", "no_action", "rejected"
# Every outcome a decision records: what live mode would do with a valid envelope, or `rejected`.
OUTCOMES = (WOULD_DISPATCH, BLOCKED, NO_ACTION, REJECTED)
# The gates in their order, each as (the name its decisions record, its check).
_CHECKS = tuple((gate.name, gate.check) for gate in GATES)


@dataclass(slots=True)
class Evaluation:
    outcome: str
    role: str | None
    gates: list[dict[str, Any]]
    rule: Rule | None = None  # the policy's rule that matched the event, if one did

    @property
    def rule_name(self) -> str | None:
        return self.rule.name if self.rule is not None else None


def evaluate(envelope: dict[str, Any], view: BoardView, policy: Policy, *, now: datetime) -> Evaluation:
    """`envelope` must already conform to `svc.normalized-event/v0`.

    `role` is the matched rule's role even when a gate blocks it, so a blocked decision still says what it
    blocked; only `would_dispatch` counts against the retry budget.
    """
    subject = envelope["subject"]
    key = subject["id"] if subject["type"] == "ticket" else None
    ticket = view.ticket(key) if key is not None else None
    rule = policy.first_match(envelope)
    role = rule.role if rule is not None else None
    given = GateInput(envelope, ticket, view, policy, now, role, key)
    results = []
    passed = True
    for name, check in _CHECKS:
        # Each gate's verdict as the decision records it (`GateResult.as_dict`'s shape), built directly: this
        # loop runs six times for every event, replayed line and backtested decision.
        ok, reason = check(given)
        passed = passed and ok
        results.append({"gate": name, "passed": ok, "reason": reason})
    if not passed:
        outcome = BLOCKED
    elif role is not None:
        outcome = WOULD_DISPATCH
    else:
        outcome = NO_ACTION
    return Evaluation(outcome, role, results, rule)
