"""Evaluating one valid envelope under a policy: its rules, then every gate; the outcome says what live mode would
do.

| outcome          | when (the first that applies)                                                                |
|------------------|----------------------------------------------------------------------------------------------|
| `own`            | the service's own event (`is_own`): never evidence, never dispatched; it still moves its ticket |
| `stuck`          | the fixer rule matched and its retry budget is spent: the ticket goes to `blocked`            |
| `blocked`        | a gate failed                                                                                |
| `would_dispatch` | a rule with a role matched                                                                   |
| `no_action`      | no rule matched, or its role is null                                                         |
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from domain.policy.document import Policy
from domain.policy.rules import Rule
from domain.router.board_view import BoardView
from domain.router.gates import GATES, GateInput
from storage.models import JSON

WOULD_DISPATCH, BLOCKED, NO_ACTION, REJECTED = "would_dispatch", "blocked", "no_action", "rejected"
OWN, STUCK = "own", "stuck"
# Every outcome a decision records: what live mode would do with a valid envelope, or `rejected`.
OUTCOMES = (OWN, STUCK, WOULD_DISPATCH, BLOCKED, NO_ACTION, REJECTED)
# The gates in their order, each as (the name its decisions record, its check).
_CHECKS = tuple((gate.name, gate.check) for gate in GATES)
DEFAULT_MAX_AGE = 3600.0
# The kinds of actor that act for the service itself (a worker account acts as an agent).
OWN_ACTOR_KINDS = frozenset({"system", "agent"})


@dataclass(slots=True)
class Evaluation:
    outcome: str
    role: str | None
    gates: list[dict[str, JSON]]
    rule: Rule | None = None  # the policy's rule that matched the event, if one did

    @property
    def rule_name(self) -> str | None:
        return self.rule.name if self.rule is not None else None


def is_own(envelope: Mapping[str, JSON], own_forge_ids: Collection[str] = ()) -> bool:
    """The service's own event: from `svc` by a system or agent actor (a job's claim, result, forge write, lease;
    a move the loop made), or a forge event whose sender is the service's own forge account (`own_forge_ids`,
    `github:<login>`: what `GET /user` says of its token)."""
    actor = envelope["actor"]
    source = envelope["source"]
    if source == "svc":
        return actor["kind"] in OWN_ACTOR_KINDS
    return source == "forge" and bool(own_forge_ids) and actor.get("id") in own_forge_ids


def evaluate(
    envelope: dict[str, JSON],
    view: BoardView,
    policy: Policy,
    *,
    now: datetime,
    own: bool = False,
    max_age: float = DEFAULT_MAX_AGE,
) -> Evaluation:
    """`envelope` must already conform to `svc.normalized-event/v0`; `own` says it is the service's own event.

    `role` is the matched rule's role even when a gate blocks it, so a blocked decision still says what it
    blocked; only `would_dispatch` counts against the retry budget.
    """
    subject = envelope["subject"]
    key = subject["id"] if subject["type"] == "ticket" else None
    ticket = view.ticket(key) if key is not None else None
    rule = policy.first_match(envelope)
    role = rule.role if rule is not None else None
    given = GateInput(envelope, ticket, view, policy, now, role, key, max_age)
    results = []
    passed = True
    budget_spent = False
    for name, check in _CHECKS:
        # Each gate's verdict as the decision records it (`GateResult.as_dict`'s shape), built directly: this
        # loop runs seven times for every event, replayed line and backtested decision.
        ok, reason = check(given)
        if not ok:
            passed = False
            budget_spent = budget_spent or name == "retry_budget"
        results.append({"gate": name, "passed": ok, "reason": reason})
    if own:
        outcome = OWN
    elif budget_spent and role == "fixer":
        outcome = STUCK
    elif not passed:
        outcome = BLOCKED
    elif role is not None:
        outcome = WOULD_DISPATCH
    else:
        outcome = NO_ACTION
    return Evaluation(outcome, role, results, rule)
