"""The gates of the contract, as small functions run in its explicit order. Every gate is evaluated and recorded
with its reason, not only the first that fails: a decision says everything that would stop live dispatch.

| gate           | passes when                                                                                   |
|----------------|-----------------------------------------------------------------------------------------------|
| `authorization`| the actor id is on the policy's allowlist; kinds `unknown`, `untrusted_comment` fail closed   |
| `agreement`    | the subject's initiative is `active` or `done` (past the agree stage), and the subject ticket |
|                | is not itself in stage `agreement`                                                            |
| `budget`       | the wallet is not locked                                                                      |
| `fleet`        | fewer dispatch jobs run than the fleet size (what a claim counts too)                         |
| `human_gate`   | the ticket is not in, and the transition does not lead to, `human_test` or `human_merge`      |
| `retry_budget` | the event would dispatch no fixer, or the ticket's fixer jobs since its last green pipeline   |
|                | (a job for the failing head itself aside) are below the policy's retry budget                 |
| `fresh`        | the event is no older than `SVC_DISPATCH_MAX_AGE_SECONDS` (default 3600) by its `occurred_at`  |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain.policy.document import Policy
from domain.router.board_view import BoardView, TicketState

FAIL_CLOSED_ACTORS = frozenset({"unknown", "untrusted_comment"})
AGREED_INITIATIVE_STAGES = frozenset({"active", "done"})
HUMAN_GATES = frozenset({"human_test", "human_merge"})


@dataclass(slots=True)
class GateInput:
    envelope: dict[str, Any]
    ticket: TicketState | None  # the subject's board ticket, when the subject is a known ticket
    view: BoardView
    policy: Policy
    now: datetime
    # The role of the rule that matches the event (the policy's, `domain/policy/rules.py`), or None: what live mode
    # would dispatch.
    role: str | None = None
    # The subject's ticket key when the subject is a ticket (known on the board or not), else None.
    subject_key: str | None = None
    # How old an event may be and still be dispatched (SVC_DISPATCH_MAX_AGE_SECONDS).
    max_age: float = 3600.0


@dataclass(slots=True)
class GateResult:
    gate: str
    passed: bool
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"gate": self.gate, "passed": self.passed, "reason": self.reason}


# What a gate's check says: (passed, reason).
Verdict = tuple[bool, str]


@dataclass(frozen=True)
class Gate:
    """A named gate: `check` reads the event and the board and says whether it passes and why."""

    name: str
    check: Callable[[GateInput], Verdict]

    def __call__(self, given: GateInput) -> GateResult:
        passed, reason = self.check(given)
        return GateResult(self.name, passed, reason)


def authorization_gate(given: GateInput) -> Verdict:
    actor = given.envelope["actor"]
    kind, ident = actor["kind"], actor.get("id")
    if kind in FAIL_CLOSED_ACTORS:
        return False, f"actor kind {kind} fails closed"
    if not ident:
        return False, f"the {kind} actor has no id to check against the allowlist"
    if ident in given.policy.allowlist:
        return True, f"actor {ident} is on the allowlist"
    return False, f"actor {ident} is not on the policy's allowlist"


def agreement_gate(given: GateInput) -> Verdict:
    if given.ticket is not None and given.ticket.stage == "agreement":
        return False, f"{given.ticket.key} is itself still in agreement"
    # The board's ticket says which initiative it belongs to; the envelope's claim counts only without one.
    initiative = given.ticket.initiative_id if given.ticket else given.envelope["subject"].get("initiative_id")
    stage = given.view.initiative_stage(initiative) if initiative else None
    if stage is None:
        return (
            False,
            f"initiative {initiative} is not on the board" if initiative else "no initiative is known for the subject",
        )
    if stage in AGREED_INITIATIVE_STAGES:
        return True, f"initiative {initiative} is {stage}"
    return False, f"initiative {initiative} is at {stage}, not yet agreed"


def budget_gate(given: GateInput) -> Verdict:
    if given.view.wallet_locked():
        return False, "the wallet is locked"
    return True, "the wallet is not locked"


def fleet_gate(given: GateInput) -> Verdict:
    running = given.view.jobs_running()
    size = given.policy.fleet_size
    return running < size, f"{running} job(s) running; fleet size {size}"


def human_gate(given: GateInput) -> Verdict:
    if given.ticket is not None and given.ticket.stage in HUMAN_GATES:
        return False, f"{given.ticket.key} is at the human gate {given.ticket.stage}"
    target = given.envelope["transition"].get("to")
    if target in HUMAN_GATES:
        return False, f"the transition leads to the human gate {target}"
    return True, "no human gate is in the way"


def retry_budget_gate(given: GateInput) -> Verdict:
    key = given.subject_key
    budget = given.policy.retry_budget
    if given.role != "fixer":
        # The budget limits how often a fixer retries a red pipeline; a used-up budget must not block a coder
        # dispatch or any other event about the ticket.
        return True, "no fixer rule would dispatch for this event; the budget gates fixers only"
    if key is None:
        return True, "the subject is not a ticket; no fixer dispatches to count"
    forge = given.envelope.get("forge")
    head = forge.get("head_sha") if isinstance(forge, dict) else None
    used = given.view.fixer_dispatches(key, head if isinstance(head, str) else None)
    return used < budget, f"{used} of {budget} fixer dispatches used since the last green pipeline"


def fresh_gate(given: GateInput) -> Verdict:
    age = given.view.age_seconds(given.envelope["occurred_at"], given.now)
    if age <= given.max_age:
        return True, f"{_duration(age)} old"
    return False, f"{_duration(age)} old, older than {_duration(given.max_age)} (SVC_DISPATCH_MAX_AGE_SECONDS)"


def _duration(seconds: float) -> str:
    whole = int(seconds)
    if whole < 120:
        return f"{whole} s"
    if whole < 7200:
        return f"{whole // 60} min"
    if whole < 172800:
        return f"{whole // 3600} h"
    return f"{whole // 86400} days"


# The contract's explicit order, each gate with the name its decisions record.
GATES: tuple[Gate, ...] = (
    Gate("authorization", authorization_gate),
    Gate("agreement", agreement_gate),
    Gate("budget", budget_gate),
    Gate("fleet", fleet_gate),
    Gate("human_gate", human_gate),
    Gate("retry_budget", retry_budget_gate),
    Gate("fresh", fresh_gate),
)
GATE_NAMES = tuple(gate.name for gate in GATES)
