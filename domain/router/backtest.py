"""What would this policy change do? Every recorded decision in a range, re-evaluated under a candidate policy
against the board as it was when it was taken (its recorded `facts`), with its own envelope and moment.

The gates are the very same functions the live router runs; only the view differs (`RecordedBoardView`). The
retry budget counts the candidate's own would-be fixer dispatches as it goes, as `svc replay` does: each ticket's
recorded count is corrected by the dispatches the candidate made differently earlier in the range. Under the
policy each decision recorded, a backtest therefore flips nothing (the reproduction law,
`tests/domain/router/test_backtest_law.py`). Decisions recorded before decisions kept their facts are counted as
not replayable, never guessed. Nothing is written.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from domain.router.board_view import RETRY_WINDOW, Facts, RecordedBoardView
from domain.router.evaluation import WOULD_DISPATCH, evaluate
from domain.router.gates import GATE_NAMES, Policy
from storage import decisions


@dataclass(frozen=True)
class Flip:
    decision_id: int
    event_id: str | None
    subject_id: str | None
    recorded: str
    candidate: str
    gates: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "decision_id": self.decision_id,
            "event_id": self.event_id,
            "subject_id": self.subject_id,
            "recorded": self.recorded,
            "candidate": self.candidate,
            "gates": list(self.gates),
        }


@dataclass
class Report:
    policy: Policy | None  # None: each decision under the policy it recorded
    list_at_most: int | None = None
    evaluated: int = 0
    unchanged: int = 0
    flipped: int = 0
    not_replayable: int = 0
    flips_by_gate: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GATE_NAMES, 0))
    flips: list[Flip] = field(default_factory=list)

    def add_flip(self, flip: Flip) -> None:
        self.flipped += 1
        for gate in flip.gates:
            self.flips_by_gate[gate] += 1
        if self.list_at_most is None or len(self.flips) < self.list_at_most:
            self.flips.append(flip)

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.as_dict() if self.policy is not None else None,
            "evaluated": self.evaluated,
            "unchanged": self.unchanged,
            "flipped": self.flipped,
            "not_replayable": self.not_replayable,
            "flips_by_gate": dict(self.flips_by_gate),
            "flips_listed": len(self.flips),
            "flips": [flip.as_dict() for flip in self.flips],
        }

    def text(self) -> str:
        policy = self.policy
        lines = [
            f"policy {policy.version}: allowlist {', '.join(sorted(policy.allowlist)) or '(empty)'}; "
            f"retry budget {policy.retry_budget}; fleet size {policy.fleet_size}"
            if policy is not None
            else "each decision under the policy it recorded",
            f"{self.evaluated} decisions evaluated: {self.unchanged} unchanged, {self.flipped} flipped, "
            f"{self.not_replayable} not replayable (recorded before decisions kept their facts)",
        ]
        if self.flipped:
            lines.append("flips by gate: " + ", ".join(f"{g} {n}" for g, n in self.flips_by_gate.items() if n))
            for flip in self.flips:
                lines.append(
                    f"  decision {flip.decision_id} {flip.subject_id or '-'} ({flip.event_id}): "
                    f"{flip.recorded} -> {flip.candidate} because of {', '.join(flip.gates) or 'the rules'}"
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
) -> Report:
    """Re-evaluate every accepted decision in [since, until) under `candidate` (call inside a connection); with
    None, each under the policy it recorded (the reproduction law: nothing flips).

    `rows` replaces the database's decisions (tuples as `storage.decisions.for_backtest` yields them)."""
    report = Report(candidate, list_at_most)
    recorded_policies: dict[str, Policy] = {}
    ledger = FixerLedger()
    seen = 0
    for decision_id, event_id, subject_id, outcome, evaluated_at, gates, envelope, facts, recorded_policy in (
        rows if rows is not None else decisions.for_backtest(since, until)
    ):
        report.evaluated += 1
        if facts is None:
            report.not_replayable += 1
            continue
        view = RecordedBoardView(Facts.from_dict(_load(facts)), subject_id, ledger.more)
        envelope = _load(envelope)
        if candidate is not None:
            policy = candidate
        else:
            key = recorded_policy if isinstance(recorded_policy, str) else json.dumps(recorded_policy, sort_keys=True)
            if key not in recorded_policies:
                recorded_policies[key] = Policy.from_dict(_load(recorded_policy))
            policy = recorded_policies[key]
        result = evaluate(envelope, view, policy, now=evaluated_at)
        if result.role == "fixer" and subject_id:
            ledger.note(
                subject_id,
                evaluated_at,
                recorded=outcome == WOULD_DISPATCH,
                candidate=result.outcome == WOULD_DISPATCH,
            )
        if result.outcome == outcome:
            report.unchanged += 1
        else:
            was = {g["gate"]: g["passed"] for g in _load(gates)}
            changed = tuple(g["gate"] for g in result.gates if was.get(g["gate"]) != g["passed"])
            report.add_flip(Flip(decision_id, event_id, subject_id, outcome, result.outcome, changed))
        seen += 1
        if seen % 10_000 == 0:
            ledger.forget_before(evaluated_at - RETRY_WINDOW)
    return report


def _load(value: Any) -> Any:
    """A JSON column as stored (text), or already parsed (tuples given by a caller)."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:  # what orjson refuses and json reads (an integer beyond 64 bits)
        return json.loads(value)
