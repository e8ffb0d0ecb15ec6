"""`svc replay`: recorded envelopes through the same gates and rules, offline, one decision per line.

The file is streamed line by line and the board is a snapshot held in memory (read once from the database,
or from a snapshot file), so memory stays flat however long the file is, and nothing is written anywhere:
a policy change (`--allowlist`, `--retry-budget`) can be compared on real history before it ships.

Each line is an envelope, or a decision as `GET /api/v1/router/decisions` returns it (its `envelope` is
replayed). The time of each evaluation is the envelope's `occurred_at`, so every event is fresh, and the retry
budget counts the replayed fixer dispatches since the ticket's last replayed green pipeline. The service's own
events are `own` (by their source and actor: a replay knows no forge account). A repeated event id within the last
`RECENT_IDS` lines is a duplicate, as the live router would treat a redelivery.
"""

from __future__ import annotations

import json
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

import orjson

from contracts import conforms
from contracts.envelope import ENVELOPE, envelope_violations
from domain.clock import parse_timestamp
from domain.policy.document import Policy
from domain.router.board_view import RecordingBoardView, SnapshotBoardView
from domain.router.evaluation import BLOCKED, NO_ACTION, OWN, REJECTED, STUCK, WOULD_DISPATCH, evaluate, is_own

RECENT_IDS = 10_000


@dataclass
class ReplaySummary:
    lines: int = 0
    outcomes: Counter = field(default_factory=Counter)
    roles: Counter = field(default_factory=Counter)
    duplicates: int = 0

    def text(self) -> str:
        named = (WOULD_DISPATCH, BLOCKED, STUCK, NO_ACTION, OWN)
        parts = ", ".join(f"{name} {self.outcomes.get(name, 0)}" for name in named)
        roles = ", ".join(f"{role} {n}" for role, n in sorted(self.roles.items())) or "none"
        return (
            f"replayed {self.lines} line(s): {parts}, rejected {self.outcomes.get(REJECTED, 0)}, "
            f"duplicates {self.duplicates}; would dispatch by role: {roles}"
        )


def replay(
    lines: Iterable[str],
    view: SnapshotBoardView,
    policy: Policy,
    out: TextIO,
    *,
    with_envelope: bool = False,
    recent_ids: int = RECENT_IDS,
) -> ReplaySummary:
    """Evaluate each line of `lines` and write one decision per line to `out`; return the counts."""
    summary = ReplaySummary()
    recorded = policy.recorded  # the policy as each decision records it, worked out once
    recent: OrderedDict[str, int] = OrderedDict()
    # A file's text stream takes the encoded lines straight into its buffer (a line is written per envelope).
    raw = getattr(out, "buffer", None)
    if raw is not None:
        out.flush()
    for number, line in enumerate(lines, 1):
        if not line or line.isspace():
            continue
        summary.lines += 1
        decision = _one(number, line, view, policy, recorded, recent, recent_ids, summary)
        if not with_envelope:
            decision.pop("envelope", None)
        try:  # a line per envelope is most of replay's own work: by orjson, by json for what orjson refuses
            encoded = orjson.dumps(decision, option=orjson.OPT_APPEND_NEWLINE)
        except TypeError:
            encoded = _line(decision)
        if raw is not None:
            raw.write(encoded)
        else:
            out.write(encoded.decode())
    if raw is not None:
        raw.flush()
    return summary


def _line(decision: dict[str, Any]) -> bytes:
    """One decision as a UTF-8 JSON line by json, for what orjson refuses (an integer beyond 64 bits, a lone
    surrogate in a rejected line, escaped)."""
    return (json.dumps(decision, separators=(",", ":")) + "\n").encode()


def _one(
    number: int,
    line: str,
    view: SnapshotBoardView,
    policy: Policy,
    recorded: dict[str, Any],
    recent: OrderedDict[str, int],
    recent_ids: int,
    summary: ReplaySummary,
) -> dict[str, Any]:
    try:
        document = json.loads(line)
    except ValueError as exc:
        summary.outcomes[REJECTED] += 1
        return _rejected(number, None, [{"path": "", "message": f"not JSON: {exc}"}])
    if isinstance(document, dict) and "outcome" in document and isinstance(document.get("envelope"), dict):
        document = document["envelope"]  # a decision exported from the API
    if not conforms(ENVELOPE, document):  # the fast verdict first; what is wrong only when something is
        found = envelope_violations(document)
        if found:
            summary.outcomes[REJECTED] += 1
            return _rejected(number, document, [v.as_dict() for v in found])
    event_id = document["id"]
    if event_id in recent:
        summary.duplicates += 1
        return {"line": number, "event_id": event_id, "duplicate_of_line": recent[event_id], "dispatched": False}
    recent[event_id] = number
    if len(recent) > recent_ids:
        recent.popitem(last=False)
    now = parse_timestamp(document["occurred_at"])
    reading = RecordingBoardView(view)
    result = evaluate(document, reading, policy, now=now, own=is_own(document))
    subject = document["subject"]
    if result.outcome == WOULD_DISPATCH:
        summary.roles[result.role] += 1
        if result.role == "fixer" and subject["type"] == "ticket":
            view.note_fixer_dispatch(subject["id"], now)
    if document["transition"]["kind"] == "pipeline_passed" and subject["type"] == "ticket":
        view.note_green(subject["id"])
    summary.outcomes[result.outcome] += 1
    return {
        "line": number,
        "event_id": event_id,
        "evaluated_at": document["occurred_at"],
        "mode": "replay",
        "source": document["source"],
        "kind": document["transition"]["kind"],
        "subject_id": subject["id"],
        "outcome": result.outcome,
        "rule": result.rule_name,
        "role": result.role,
        "gates": result.gates,
        "dispatched": False,
        "envelope": document,
        # What the gates applied and read, as a live decision records them.
        "policy": recorded,
        "facts": reading.facts_dict(),
    }


def _rejected(number: int, document: Any, errors: list[dict[str, str]]) -> dict[str, Any]:
    event_id = document.get("id") if isinstance(document, dict) else None
    return {
        "line": number,
        "event_id": event_id if isinstance(event_id, str) else None,
        "mode": "replay",
        "outcome": REJECTED,
        "rule": None,
        "role": None,
        "gates": [],
        "dispatched": False,
        "errors": errors,
        "envelope": document,
        "policy": None,
        "facts": None,
    }
