"""The router's scorecard rows (`domain/router/scorecard.py` judges them): one entry per decision it judges, when
the team first took that work up, the counts of settled days, and the mark that says how far they are counted."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import Any

from peewee import Case, fn

from storage import statements
from storage.models import ScorecardDay, ScorecardEntry, ScorecardMark

_ENTRY = ScorecardEntry._meta.table_name
_DAY = ScorecardDay._meta.table_name
_AT = ScorecardEntry.evaluated_at.db_value


def enter(
    *,
    decision_id: int,
    subject_id: str,
    role: str,
    outcome: str,
    failed_gates: str,
    at: datetime,
    rule: str | None,
    rule_version: str | None,
    taken_up_at: datetime | None = None,
) -> None:
    """`taken_up_at`: when the team took the work up after it, if that is known already (an entry recorded in the
    past, `svc import`, may have later events recorded before it)."""
    statements.execute(
        ("scorecard_enter",),
        lambda p: (
            f'INSERT INTO "{_ENTRY}" ("decision_id", "subject_id", "role", "outcome", "failed_gates", '
            f'"evaluated_at", "rule", "rule_version", "taken_up_at") '
            f"VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p})"
        ),
        [
            decision_id,
            subject_id,
            role,
            outcome,
            failed_gates,
            _AT(at),
            rule,
            rule_version,
            _AT(taken_up_at) if taken_up_at is not None else None,
        ],
    )


def take_up(subject_id: str, role: str, *, at: datetime, not_before: datetime) -> int:
    """The team took up `role` work on `subject_id` at `at`: the entries evaluated since `not_before`, up to `at`,
    keep `at` as when it happened unless they know an earlier time (only the first time counts; a signal recorded
    in the past, `svc import`, may come after a later one)."""
    return statements.execute(
        ("scorecard_take_up",),
        lambda p: (
            f'UPDATE "{_ENTRY}" SET "taken_up_at" = {p} WHERE "subject_id" = {p} AND "role" = {p} '
            f'AND ("taken_up_at" IS NULL OR "taken_up_at" > {p}) AND "evaluated_at" <= {p} AND "evaluated_at" >= {p}'
        ),
        [_AT(at), subject_id, role, _AT(at), _AT(at), _AT(not_before)],
    )


def first_at(at_or_after: datetime | None = None) -> datetime | None:
    """When the first entry (at or after `at_or_after`, when given) was evaluated; None when there is none."""
    query = ScorecardEntry.select(ScorecardEntry.evaluated_at)
    if at_or_after is not None:
        query = query.where(ScorecardEntry.evaluated_at >= at_or_after)
    value = query.order_by(ScorecardEntry.evaluated_at).limit(1).scalar()
    return ScorecardEntry.evaluated_at.python_value(value) if value is not None else None


def entries(
    since: datetime, until: datetime, *, rule_version: str | None = None, batch: int = 5000
) -> Iterator[tuple[Any, ...]]:
    """(decision_id, role, outcome, failed_gates, evaluated_at, taken_up_at) of every entry evaluated in
    [since, until) (only those under `rule_version`, when given: a rule's evidence), oldest first, read in batches
    (memory does not grow with the range)."""
    convert = ScorecardEntry.evaluated_at.python_value
    after = (_AT(since), -1)
    while True:
        where = (ScorecardEntry.evaluated_at < until) & (
            (ScorecardEntry.evaluated_at > after[0])
            | ((ScorecardEntry.evaluated_at == after[0]) & (ScorecardEntry.decision > after[1]))
        )
        if rule_version is not None:
            where &= ScorecardEntry.rule_version == rule_version
        query = (
            ScorecardEntry.select(
                ScorecardEntry.decision,
                ScorecardEntry.role,
                ScorecardEntry.outcome,
                ScorecardEntry.failed_gates,
                ScorecardEntry.evaluated_at,
                ScorecardEntry.taken_up_at,
            )
            .where(where)
            .order_by(ScorecardEntry.evaluated_at, ScorecardEntry.decision)
            .limit(batch)
            .tuples()
        )
        rows = list(query)
        for decision_id, role, outcome, failed, evaluated, taken in rows:
            yield decision_id, role, outcome, failed, convert(evaluated), convert(taken)
        if len(rows) < batch:
            return
        last = rows[-1]
        after = (last[4], last[0])


def days(window_seconds: int, first: date, last: date) -> dict[date, dict[str, int]]:
    """The counted days from `first` to `last` (inclusive) for this window: day -> key -> count."""
    found: dict[date, dict[str, int]] = {}
    query = (
        ScorecardDay.select(ScorecardDay.day, ScorecardDay.key, ScorecardDay.count)
        .where(
            (ScorecardDay.window_seconds == window_seconds) & (ScorecardDay.day >= first) & (ScorecardDay.day <= last)
        )
        .tuples()
    )
    for day, key, count in query:
        found.setdefault(day, {})[key] = count
    return found


def first_day(window_seconds: int) -> date | None:
    """The first counted day kept for this window, or None: where the counts reach back to once the entries of the
    oldest days were archived."""
    return ScorecardDay.select(fn.MIN(ScorecardDay.day)).where(ScorecardDay.window_seconds == window_seconds).scalar()


def mark(window_seconds: int) -> tuple[date | None, int]:
    """How far this window's settled days are counted (the last day counted, or None: not yet), and the mark's
    version (0: no mark yet)."""
    row = (
        ScorecardMark.select(ScorecardMark.through, ScorecardMark.version)
        .where(ScorecardMark.window_seconds == window_seconds)
        .tuples()
        .first()
    )
    return (row[0], row[1]) if row is not None else (None, 0)


def keep_days(window_seconds: int, counted: dict[date, dict[str, int]], *, through: date, version: int) -> bool:
    """Keep the counts of settled days (day -> key -> count; only days with entries) and move the mark to
    `through`, if the mark is still at `version` (what the counting read); else keep nothing and say so (False):
    the days were dropped meanwhile (`drop_days_from`), and must be counted again."""
    if version == 0:
        # No mark when the counting read it: make one as it was then (nothing counted); if another writer made it
        # meanwhile, its version is past 1 by now and the swap below fails.
        ScorecardMark.insert(window_seconds=window_seconds, through=None, version=1).on_conflict_ignore().execute()
        version = 1
    moved = (
        ScorecardMark.update(through=through, version=ScorecardMark.version + 1)
        .where((ScorecardMark.window_seconds == window_seconds) & (ScorecardMark.version == version))
        .execute()
    )
    if not moved:
        return False
    rows = [
        {"window_seconds": window_seconds, "day": day, "key": key, "count": count}
        for day, counts in counted.items()
        for key, count in counts.items()
    ]
    for start in range(0, len(rows), 500):
        ScorecardDay.insert_many(rows[start : start + 500]).execute()
    return True


def drop_days_from(day: date, window_seconds: tuple[int, ...]) -> None:
    """Entries were recorded or taken up at a past time, on `day` or later: the counts kept from that
    day on are dropped, and each window's mark moves back before it (and is bumped even where it was not that far,
    so that a count in progress, which read the entries before these, is never kept)."""
    previous = ScorecardMark.through.db_value(day - timedelta(days=1))  # a value of a CASE is not converted
    ScorecardDay.delete().where(ScorecardDay.day >= day).execute()
    for seconds in window_seconds:
        ScorecardMark.insert(window_seconds=seconds, through=None, version=1).on_conflict_ignore().execute()
    (
        ScorecardMark.update(
            through=Case(None, [(ScorecardMark.through >= day, previous)], ScorecardMark.through),
            version=ScorecardMark.version + 1,
        )
        .where(ScorecardMark.window_seconds.in_(window_seconds))
        .execute()
    )
