"""The archivist's rows (`domain/ops/archivist.py` decides what is old and writes the files): which rows of each kind
may leave the database, read in id order; their delete, with the hourly counts of what left (`ArchivedCount`) in
the same transaction; and those counts read back (a backtest's `archived`, the scorecard's archived days).

What may leave is said here once per kind, and said again in the delete, so that a row that became live again
between its reading and its delete (a job retried for an old decision) stays."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime

from peewee import EXCLUDED, Expression, Field, Model, fn

from storage.db import is_postgres
from storage.models import (
    AgentRun,
    ArchivedCount,
    DispatchJob,
    OutboxMessage,
    ReconciliationGap,
    RouterDecision,
    ScorecardEntry,
    Ticket,
    TimelineEntry,
    stored_day,
)

# How many ids one `IN (...)` carries: well below SQLite's and PostgreSQL's limits on bound values.
CHUNK = 500
DECISIONS = "decisions"
# The kind the backtest's `archived` reads: archived decisions a backtest would have evaluated (not rejected, not
# the service's own; `decisions.for_backtest`).
BACKTESTED = "decisions-backtested"


@dataclass(frozen=True)
class Kind:
    """One kind of row the archivist moves: its table, the column that is its own time, and what else it must be."""

    name: str
    model: type[Model]
    time: Field
    # Column -> the values it must hold (a final state); `final_tickets`: the row's ticket is finished.
    states: tuple[Field, Collection[str]] | None = None
    final_tickets: Collection[str] | None = None
    # Decisions: none that a dispatch job still refers to (deleting it would take the job with it), and a judged one
    # (with a scorecard entry, which stays) only from a day whose scorecard counts are kept.
    unreferenced: bool = False

    def old(self, before: datetime, scored_before: datetime | None = None) -> Expression:
        """What may leave: older than `before`, and for a decision with a scorecard entry, than `scored_before` too
        (None: no judged decision may leave)."""
        # The newest row of its table never leaves: SQLite numbers a new row one past the largest id there is, so
        # moving the newest out would hand its id to the next row (an archive line and a scorecard entry would then
        # name two rows). It leaves once a newer one is there.
        newest = self.model.alias()
        where = (self.time < before) & (self.model.id < newest.select(fn.MAX(newest.id)))
        if self.states is not None:
            column, values = self.states
            where &= column.in_(sorted(values))
        if self.final_tickets is not None:
            finished = Ticket.select(Ticket.key).where(Ticket.stage.in_(sorted(self.final_tickets)))
            where &= TimelineEntry.ticket.in_(finished)
        if self.unreferenced:
            jobs = DispatchJob.select(DispatchJob.id).where(DispatchJob.decision == RouterDecision.id)
            where &= ~fn.EXISTS(jobs)
            entry = ScorecardEntry.select(ScorecardEntry.decision).where(ScorecardEntry.decision == RouterDecision.id)
            unjudged = ~fn.EXISTS(entry)
            where &= unjudged if scored_before is None else (unjudged | (self.time < scored_before))
        return where


def kinds(*, final_stages: Collection[str], final_jobs: Collection[str], settled_gaps: Collection[str]) -> list[Kind]:
    """Every kind, in the order they are moved: the jobs before the decisions they refer to. The domain says which
    stages, job states and gap states are final; the outbox's are its own (sent, failed: given up, skipped)."""
    return [
        Kind("timeline", TimelineEntry, TimelineEntry.at, final_tickets=final_stages),
        Kind("runs", AgentRun, AgentRun.started_at),
        Kind("outbox", OutboxMessage, OutboxMessage.created_at, states=(OutboxMessage.status, FINAL_OUTBOX)),
        Kind("jobs", DispatchJob, DispatchJob.created_at, states=(DispatchJob.state, final_jobs)),
        Kind("gaps", ReconciliationGap, ReconciliationGap.found_at, states=(ReconciliationGap.state, settled_gaps)),
        Kind(DECISIONS, RouterDecision, RouterDecision.evaluated_at, unreferenced=True),
    ]


# Delivered, given up after its attempts, or skipped for good (`storage/outbox.py`'s SENT, FAILED, SKIPPED).
FINAL_OUTBOX = frozenset({"sent", "failed", "skipped"})


def old_rows(
    kind: Kind, before: datetime, scored_before: datetime | None = None, *, batch: int = 500
) -> Iterator[Model]:
    """Every row of `kind` that may leave (`Kind.old`), in id order, read in keyset batches (memory does not grow
    with what is old)."""
    after = 0
    key = kind.model._meta.primary_key
    while True:
        where = kind.old(before, scored_before) & (key > after)
        found = list(kind.model.select().where(where).order_by(key).limit(batch))
        yield from found
        if len(found) < batch:
            return
        after = found[-1].id


def delete(
    kind: Kind, ids: list[int], before: datetime, scored_before: datetime | None = None
) -> list[tuple[int, datetime, str | None]]:
    """Delete the rows of `ids` that may still leave (call inside the transaction that counts them); returns (id, its
    time, a decision's outcome) of each deleted. On PostgreSQL the rows are locked first, so that a writer that
    would make one live again waits for the delete, and then finds it gone."""
    key = kind.model._meta.primary_key
    outcome = RouterDecision.outcome if kind.model is RouterDecision else None
    gone: list[tuple[int, datetime, str | None]] = []
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        query = kind.model.select(key, kind.time, *([outcome] if outcome is not None else [])).where(
            kind.old(before, scored_before) & key.in_(chunk)
        )
        if is_postgres():
            query = query.for_update()
        found = list(query.tuples())
        if not found:
            continue
        kind.model.delete().where(key.in_([row[0] for row in found])).execute()
        convert = kind.time.python_value
        gone += [(row[0], convert(row[1]), row[2] if outcome is not None else None) for row in found]
    return gone


def hour_of(moment: datetime) -> str:
    """The hour a moment falls in, as the counts are kept (`YYYY-MM-DD HH`, UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H")


def count(counts: dict[tuple[str, str], int]) -> None:
    """Add (kind, hour) -> rows to the archived counts (in the transaction of the delete they count)."""
    rows = [{"kind": kind, "hour": hour, "count": n} for (kind, hour), n in sorted(counts.items())]
    for start in range(0, len(rows), CHUNK):
        (
            ArchivedCount.insert_many(rows[start : start + CHUNK])
            .on_conflict(
                conflict_target=[ArchivedCount.kind, ArchivedCount.hour],
                update={ArchivedCount.count: ArchivedCount.count + EXCLUDED.count},
            )
            .execute()
        )


def archived(kind: str, first_hour: str | None = None, last_hour: str | None = None) -> int:
    """How many rows of `kind` were archived from the hours `first_hour` to `last_hour` (inclusive, `YYYY-MM-DD HH`;
    open-ended where None)."""
    query = ArchivedCount.select(fn.COALESCE(fn.SUM(ArchivedCount.count), 0)).where(ArchivedCount.kind == kind)
    if first_hour is not None:
        query = query.where(ArchivedCount.hour >= first_hour)
    if last_hour is not None:
        query = query.where(ArchivedCount.hour <= last_hour)
    return int(query.scalar() or 0)


def last_day(kind: str) -> date | None:
    """The day of the latest hour from which rows of `kind` were archived, or None."""
    hour = ArchivedCount.select(fn.MAX(ArchivedCount.hour)).where(ArchivedCount.kind == kind).scalar()
    return stored_day(hour[:10]) if hour is not None else None  # `YYYY-MM-DD HH`
