"""What would this policy change do? Every recorded decision in a range, re-evaluated under a candidate policy
(its knobs and its rules) against the board as it was when it was taken (its recorded `facts`), with its own
envelope and moment.

The rules and gates are the very same the live router runs; only the view differs (`RecordedBoardView`). The
retry budget counts the candidate's own would-be fixer dispatches as it goes, as `svc replay` does: each ticket's
recorded count is corrected by the dispatches the candidate made differently earlier in the range. Under the
policy each decision recorded, a backtest therefore flips nothing (the reproduction law,
`tests/domain/router/test_backtest_law.py`). Decisions of the range that were archived are counted (`archived`),
never read. Decisions recorded before decisions kept their facts are counted as
not replayable, never guessed; the service's own (`own`) are no one's to judge and are left out. An event's age is
the one recorded: `fresh` is judged at the decision's own time. Nothing is written.

A decision flips when its outcome or its role would differ (a candidate's rule may dispatch another role on the
same event). A flip names the gates whose verdict changed and, when another rule matched, the rule recorded and the
candidate's; flips are counted by gate and by rule (its recorded rule, else the candidate's, else `NO_RULE`). A
decision recorded before the rules were data recorded no rule: its rule is the one its policy's rules (the first
policy's three) match.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson

from domain.policy.document import FIRST_RULES, Policy, compile_rules
from domain.policy.rules import first_match
from domain.router.board_view import RETRY_WINDOW, Facts, RecordedBoardView
from domain.router.evaluation import DEFAULT_MAX_AGE, WOULD_DISPATCH, evaluate
from domain.router.gates import GATE_NAMES
from storage import archive, decisions

# The key `flips_by_rule` counts a flip under when neither the recorded decision nor the candidate matched a rule
# (never a rule's name: those are lower-case letters, digits and underscores).
NO_RULE = "(no rule)"


@dataclass(frozen=True)
class Flip:
    decision_id: int
    event_id: str | None
    subject_id: str | None
    recorded: str
    candidate: str
    gates: tuple[str, ...]
    recorded_rule: str | None = None
    candidate_rule: str | None = None
    recorded_role: str | None = None
    candidate_role: str | None = None

    @property
    def rule_changed(self) -> bool:
        return self.recorded_rule != self.candidate_rule

    @property
    def counted_under(self) -> str:
        """The rule `flips_by_rule` counts it under: the recorded one, else the candidate's, else `NO_RULE`."""
        return self.recorded_rule or self.candidate_rule or NO_RULE

    def as_dict(self) -> dict[str, Any]:
        found = {
            "decision_id": self.decision_id,
            "event_id": self.event_id,
            "subject_id": self.subject_id,
            "recorded": self.recorded,
            "candidate": self.candidate,
            "gates": list(self.gates),
        }
        if self.rule_changed:
            found["rule"] = {"recorded": self.recorded_rule, "candidate": self.candidate_rule}
        return found

    def words(self) -> str:
        """The change in words: the outcome before and after, each with its role when the role changed."""
        if self.recorded_role == self.candidate_role:
            return f"{self.recorded} -> {self.candidate}"
        before = f"{self.recorded} ({self.recorded_role or 'no role'})"
        return f"{before} -> {self.candidate} ({self.candidate_role or 'no role'})"


@dataclass
class Report:
    policy: Policy | None  # None: each decision under the policy it recorded
    list_at_most: int | None = None
    evaluated: int = 0
    unchanged: int = 0
    flipped: int = 0
    not_replayable: int = 0
    # Decisions of the range the archivist moved out of the database (`domain/ops/archivist.py`): not read.
    archived: int = 0
    flips_by_gate: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GATE_NAMES, 0))
    flips_by_rule: dict[str, int] = field(default_factory=dict)
    flips: list[Flip] = field(default_factory=list)

    def add_flip(self, flip: Flip) -> None:
        self.flipped += 1
        for gate in flip.gates:
            self.flips_by_gate[gate] += 1
        rule = flip.counted_under
        self.flips_by_rule[rule] = self.flips_by_rule.get(rule, 0) + 1
        if self.list_at_most is None or len(self.flips) < self.list_at_most:
            self.flips.append(flip)

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.as_dict() if self.policy is not None else None,
            "evaluated": self.evaluated,
            "unchanged": self.unchanged,
            "flipped": self.flipped,
            "not_replayable": self.not_replayable,
            "archived": self.archived,
            "flips_by_gate": dict(self.flips_by_gate),
            "flips_by_rule": dict(self.flips_by_rule),
            "flips_listed": len(self.flips),
            "flips": [flip.as_dict() for flip in self.flips],
        }

    def text(self) -> str:
        policy = self.policy
        if policy is not None:
            rules = ", ".join(f"{rule.name} ({rule.role or 'no role'}, {rule.mode})" for rule in policy.rules)
            lines = [
                f"policy {policy.version}: allowlist {', '.join(sorted(policy.allowlist)) or '(empty)'}; "
                f"retry budget {policy.retry_budget}; fleet size {policy.fleet_size}; rules {rules or '(none)'}"
            ]
        else:
            lines = ["each decision under the policy it recorded"]
        lines.append(
            f"{self.evaluated} decisions evaluated: {self.unchanged} unchanged, {self.flipped} flipped, "
            f"{self.not_replayable} not replayable (recorded before decisions kept their facts)"
        )
        if self.archived:
            lines.append(f"{self.archived} decisions of the range archived (not read: see SVC_DATA_DIR/archive/)")
        if self.flipped:
            by_gate = ", ".join(f"{g} {n}" for g, n in self.flips_by_gate.items() if n)
            lines.append(f"flips by gate: {by_gate or 'none (the rules changed)'}")
            lines.append("flips by rule: " + ", ".join(f"{r} {n}" for r, n in self.flips_by_rule.items()))
            for flip in self.flips:
                because = ", ".join(flip.gates) or "the rules"
                rule = (
                    f"; rule {flip.recorded_rule or NO_RULE} -> {flip.candidate_rule or NO_RULE}"
                    if flip.rule_changed
                    else ""
                )
                lines.append(
                    f"  decision {flip.decision_id} {flip.subject_id or '-'} ({flip.event_id}): "
                    f"{flip.words()} because of {because}{rule}"
                )
            if len(self.flips) < self.flipped:
                lines.append(f"  ... and {self.flipped - len(self.flips)} more")
        return "\n".join(lines)


class FixerLedger:
    """Per ticket, the fixer dispatches of the last day the backtest has seen, as recorded and as the candidate
    would have made them; the difference corrects each later decision's recorded count."""

    def __init__(self) -> None:
        self.recorded: dict[str, deque[datetime]] = {}
        self.candidate: dict[str, deque[datetime]] = {}

    def more(self, key: str, since: datetime) -> int:
        return _recent(self.candidate, key, since) - _recent(self.recorded, key, since)

    def note(self, key: str, at: datetime, *, recorded: bool, candidate: bool) -> None:
        if recorded:
            self.recorded.setdefault(key, deque()).append(at)
        if candidate:
            self.candidate.setdefault(key, deque()).append(at)

    def forget_before(self, moment: datetime) -> None:
        """Drop what no later decision can count (keeps memory flat over a long range)."""
        for ledger in (self.recorded, self.candidate):
            for key in [k for k, times in ledger.items() if not times or times[-1] < moment]:
                del ledger[key]


def _recent(ledger: dict[str, deque[datetime]], key: str, since: datetime) -> int:
    times = ledger.get(key)
    if not times:
        return 0
    while times and times[0] < since:
        times.popleft()
    return len(times)


def backtest(
    candidate: Policy | None,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    list_at_most: int | None = None,
    rows: Iterable[tuple] | None = None,
    max_age: float = DEFAULT_MAX_AGE,
) -> Report:
    """Re-evaluate every accepted decision in [since, until) under `candidate` (call inside a connection); with
    None, each under the policy it recorded (the reproduction law: nothing flips).

    `rows` replaces the database's decisions (tuples as `storage.decisions.for_backtest` yields them)."""
    report = Report(candidate, list_at_most)
    recorded_policies = RecordedPolicies()
    ledger = FixerLedger()
    seen = 0
    for row in rows if rows is not None else decisions.for_backtest(since, until):
        decision_id, event_id, subject_id, outcome, evaluated_at, gates, envelope, facts, recorded_policy = row[:9]
        recorded_rule, recorded_role = row[9:11] if len(row) > 9 else (None, None)
        report.evaluated += 1
        if facts is None:
            report.not_replayable += 1
            continue
        view = RecordedBoardView(Facts.from_dict(_load(facts)), subject_id, ledger.more, now=evaluated_at)
        envelope = _load(envelope)
        policy = candidate if candidate is not None else recorded_policies.policy(recorded_policy)
        result = evaluate(envelope, view, policy, now=evaluated_at, max_age=max_age)
        if result.role == "fixer" and subject_id:
            ledger.note(
                subject_id,
                evaluated_at,
                recorded=outcome == WOULD_DISPATCH,
                candidate=result.outcome == WOULD_DISPATCH,
            )
        if result.outcome == outcome and result.role == recorded_role:
            report.unchanged += 1
        else:
            was = {g["gate"]: g["passed"] for g in _load(gates)}
            changed = tuple(g["gate"] for g in result.gates if was.get(g["gate"]) != g["passed"])
            if recorded_rule is None and recorded_policies.before_rules(recorded_policy):
                recorded_rule = first_match(FIRST, envelope)
                recorded_rule = recorded_rule.name if recorded_rule is not None else None
            report.add_flip(
                Flip(
                    decision_id,
                    event_id,
                    subject_id,
                    outcome,
                    result.outcome,
                    changed,
                    recorded_rule,
                    result.rule_name,
                    recorded_role,
                    result.role,
                )
            )
        seen += 1
        if seen % 10_000 == 0:
            ledger.forget_before(evaluated_at - RETRY_WINDOW)
    if rows is None:
        report.archived = archived_in(since, until)
    return report


def archived_in(since: datetime | None, until: datetime | None) -> int:
    """How many decisions a backtest of [since, until) would have read that were archived, from the hourly counts
    kept as they were moved (an hour the range cuts counts whole)."""
    last = archive.hour_of(until - timedelta(microseconds=1)) if until is not None else None
    return archive.archived(archive.BACKTESTED, archive.hour_of(since) if since is not None else None, last)


# The rules of every decision recorded before the rules were data: the first policy's three.
FIRST = compile_rules(FIRST_RULES)


class RecordedPolicies:
    """The policies the decisions recorded, each parsed once (a range holds a handful of versions)."""

    def __init__(self) -> None:
        self.parsed: dict[str, tuple[Policy, bool]] = {}

    def _parse(self, recorded: Any) -> tuple[Policy, bool]:
        key = recorded if isinstance(recorded, str) else json.dumps(recorded, sort_keys=True)
        found = self.parsed.get(key)
        if found is None:
            document = _load(recorded)
            found = self.parsed[key] = (Policy.from_dict(document), "rules" not in document)
        return found

    def policy(self, recorded: Any) -> Policy:
        return self._parse(recorded)[0]

    def before_rules(self, recorded: Any) -> bool:
        """Whether the decision was recorded before the rules were data (its policy carries no rules)."""
        return recorded is not None and self._parse(recorded)[1]


def _load(value: Any) -> Any:
    """A JSON column as stored (text), or already parsed (tuples given by a caller)."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:  # what orjson refuses and json reads (an integer beyond 64 bits)
        return json.loads(value)
