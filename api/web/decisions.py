"""How a router decision (a row of `storage/decisions.py`) reads on the web board: its outcome in words (shadow mode:
"would dispatch", never "dispatched"; a live rule's dispatched decision: "dispatched", with a link to its job), its
mode, a symbol beside the colour, its rule, each gate's verdict spelled out (in a
list, the failed ones alone), and a link to the subject's ticket page when the subject is a ticket on the board."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain.router.routing import OUTCOMES, SOURCES
from storage.models import RouterDecision

OUTCOME_WORDS = {
    "own": "the service's own",
    "stuck": "stuck",
    "would_dispatch": "would dispatch",
    "blocked": "blocked",
    "no_action": "no action",
    "rejected": "rejected",
}
OUTCOME_SYMBOLS = {"own": "·", "stuck": "⛔", "would_dispatch": "▶", "blocked": "✗", "no_action": "○", "rejected": "⚠"}
OUTCOME_CHOICES = tuple((outcome, OUTCOME_WORDS[outcome]) for outcome in OUTCOMES)
SOURCE_CHOICES = tuple((source, source) for source in SOURCES)


@dataclass(frozen=True)
class Gate:
    name: str
    passed: bool
    reason: str

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"


@dataclass(frozen=True)
class DecisionView:
    row: RouterDecision
    headline: str  # "would dispatch coder", "blocked: coder not dispatched", "no action", "rejected"
    symbol: str
    gates: list[Gate]
    ticket_link: str | None
    actor: str | None
    errors: list[dict[str, Any]]
    # The matched rule's name when the decision records one, else its role; None when no rule matched.
    rule: str | None
    # Its rule's mode when it was taken ("shadow" or "live"), and the job it queued when it was dispatched.
    mode: str = "shadow"
    job_id: int | None = None

    @property
    def failed(self) -> list[Gate]:
        return [g for g in self.gates if not g.passed]

    @property
    def outcome_words(self) -> str:
        """The outcome alone, for a line that names the rule beside it ("would dispatch coder" keeps its role:
        shadow mode says what it would dispatch)."""
        if self.row.outcome == "would_dispatch":
            return self.headline
        return OUTCOME_WORDS.get(self.row.outcome, self.row.outcome)


def _actor(envelope: Any) -> str | None:
    actor = envelope.get("actor") if isinstance(envelope, dict) else None
    if not isinstance(actor, dict):
        return None
    kind, ident = actor.get("kind"), actor.get("id")
    if not isinstance(kind, str):
        return None
    return f"{kind} {ident}" if isinstance(ident, str) and ident else f"{kind} (no id)"


def headline(row: RouterDecision) -> str:
    words = OUTCOME_WORDS.get(row.outcome, row.outcome)
    if row.outcome == "would_dispatch" and row.role and getattr(row, "dispatched", False):
        return f"dispatched {row.role}"
    if row.outcome == "would_dispatch" and row.role and getattr(row, "held", False):
        return f"{row.role} held: dispatch is paused"
    if row.outcome == "would_dispatch" and row.role and getattr(row, "mode", "shadow") == "live":
        # A live rule's passing decision that queued nothing: recorded only (an imported event).
        return f"{words} {row.role} (not dispatched)"
    if row.outcome == "stuck":
        return "stuck: the fixer's retry budget is spent, the ticket is blocked"
    if row.outcome == "would_dispatch" and row.role:
        return f"{words} {row.role}"
    if row.outcome == "blocked" and row.role:
        return f"{words}: {row.role} not dispatched"
    return words


def describe(row: RouterDecision, on_board: set[str]) -> DecisionView:
    gates = [
        Gate(str(g.get("gate")), bool(g.get("passed")), str(g.get("reason") or ""))
        for g in (row.gates or [])
        if isinstance(g, dict)
    ]
    return DecisionView(
        row=row,
        headline=headline(row),
        symbol=OUTCOME_SYMBOLS.get(row.outcome, "•"),
        gates=gates,
        ticket_link=f"/tickets/{row.subject_id}" if row.subject_id in on_board else None,
        actor=_actor(row.envelope),
        errors=[e for e in (row.errors or []) if isinstance(e, dict)] if row.outcome == "rejected" else [],
        # Decisions record their matched rule's name once the router's rules are data; until then, the role.
        rule=getattr(row, "rule", None) or row.role,
        mode=getattr(row, "mode", None) or "shadow",
        job_id=row.job_id if getattr(row, "dispatched", False) or getattr(row, "held", False) else None,
    )
