"""`svc import`: a team's history of envelopes recorded as if each had arrived at its `occurred_at`, so the scorecard
and the backtest learn from it, and nothing is acted on.

The lines are streamed (memory stays flat however long the file is) and routed in batches, each batch one
transaction through the router's record-only switch (`Router.receive_batch(..., record_only=True)`): the same
path a live event takes, evaluated at the event's own time, never dispatching, moving a ticket or writing a forge.
A line that is not JSON or breaks the envelope contract is rejected by its number (1-based; blank lines are
skipped) and recorded nowhere, while the others go in; an event id recorded before (or earlier in the file) is a
duplicate.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from contracts import conforms
from contracts.envelope import ENVELOPE, envelope_violations
from domain.clock import BadTimestamp, parse_timestamp
from domain.router.routing import Intake, Receipt

# Envelopes per transaction: a few hundred make the commit's cost small beside the routing, and keep a live
# writer's wait behind one batch short (measured in bench/, `make bench BENCH_ARGS=import`).
BATCH = 250
# The earliest `occurred_at` an import takes: the Unix epoch, older than any tracker, forge or CI history.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class RejectedLine:
    """A line that went nowhere: its number (1-based) and why."""

    line: int
    reasons: tuple[str, ...]


@dataclass
class ImportSummary:
    imported: int = 0
    duplicates: int = 0
    rejected: list[RejectedLine] = field(default_factory=list)

    def text(self) -> str:
        return f"imported {self.imported}, duplicates {self.duplicates}, rejected {len(self.rejected)}"


def import_history(
    lines: Iterable[str | bytes],
    route: Callable[[list[Any]], list[Receipt]],
    *,
    batch: int = BATCH,
) -> ImportSummary:
    """Record every valid envelope of `lines` through `route` (the router's record-only batch, e.g.
    `lambda b: router.receive_batch(b, record_only=True)`), `batch` at a time, in file order; return the counts."""
    summary = ImportSummary()
    pending: list[Any] = []
    for number, line in enumerate(lines, 1):
        if not line or line.isspace():
            continue
        document, reasons = _read(line)
        if reasons:
            summary.rejected.append(RejectedLine(number, reasons))
            continue
        pending.append(document)
        if len(pending) >= batch:
            _record(route(pending), summary)
            pending = []
    if pending:
        _record(route(pending), summary)
    return summary


def _read(line: str | bytes) -> tuple[Any, tuple[str, ...]]:
    """The envelope on one line, or why it is none."""
    try:
        document = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and JSON allows (an integer beyond 64 bits): the contract decides on it
            document = json.loads(line)
        except ValueError as exc:
            return None, (f"/: not JSON: {exc}",)
        except RecursionError:  # nested deeper than any envelope is (orjson stops at 1,024 levels, json here)
            return None, ("/: not JSON: nested too deep",)
    if not conforms(ENVELOPE, document):  # the fast verdict first; what is wrong only when something is
        found = envelope_violations(document)
        if found:
            return None, tuple(f"{v.path or '/'}: {v.message}" for v in found)
    try:
        occurred_at = parse_timestamp(document["occurred_at"])
    except BadTimestamp as exc:
        return None, (f"/occurred_at: {exc}",)
    if occurred_at < EARLIEST:  # the day arithmetic of the scorecard would run off the calendar's first year
        return None, (f"/occurred_at: before {EARLIEST:%Y-%m-%d}: no history to import is that old",)
    return document, ()


def _record(receipts: list[Receipt], summary: ImportSummary) -> None:
    for receipt in receipts:
        if receipt.intake is Intake.ACCEPTED:
            summary.imported += 1
        elif receipt.intake is Intake.DUPLICATE:
            summary.duplicates += 1
        else:  # checked against the same contract before routing: a bug if it happens, so said loudly
            raise RuntimeError(f"the router rejected an envelope the import found valid: {receipt.event_id}")
