"""The router's scorecard rows (`domain/router/scorecard.py` judges them): one entry per decision it judges, when
the team first took that work up, the counts of settled days and their sums by week, and the mark that says how far
they are counted."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import Any

from peewee import EXCLUDED, Case, fn

from storage import statements
from storage.db import is_postgres
from storage.models import ScorecardDay, ScorecardEntry, ScorecardMark, ScorecardWeek, stored_day

_ENTRY = ScorecardEntry._meta.table_name
_DAY = ScorecardDay._meta.table_name
_WEEK = ScorecardWeek._meta.table_name
_DAY_TEXT = ScorecardDay.day.db_value
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


def tally(
    since: datetime,
    until: datetime,
    *,
    window_seconds: int,
    closed_at_or_before: datetime,
    rule_version: str | None = None,
) -> list[tuple[date, str, str, str, str | None, bool, bool, int]]:
    """The entries evaluated in [since, until) (under `rule_version`, when given), counted by the database in groups:
    (day, role, outcome, failed_gates, rule_version, taken up within the window, window closed, count).
    "Taken up within the window": taken up no later than `window_seconds` after it was evaluated; "window closed":
    evaluated at or before `closed_at_or_before` (now less the window). Exact to the microsecond on both backends:
    SQLite adds whole seconds to the text and keeps its fraction; the texts compare as the times do (its one format,
    the fraction left out only when it is zero)."""
    by_version = rule_version is not None

    def sql(p: str) -> str:
        if is_postgres():
            day = """to_char("evaluated_at", 'YYYY-MM-DD')"""
            ends = f"\"evaluated_at\" + {p} * interval '1 second'"
        else:
            day = 'substr("evaluated_at", 1, 10)'
            ends = f"""datetime("evaluated_at", '+' || {p} || ' seconds') || substr("evaluated_at", 20)"""
        version = f' AND "rule_version" = {p}' if by_version else ""
        taken = f'CASE WHEN "taken_up_at" IS NOT NULL AND "taken_up_at" <= {ends} THEN 1 ELSE 0 END'
        closed = f'CASE WHEN "evaluated_at" <= {p} THEN 1 ELSE 0 END'
        return (
            f'SELECT {day}, "role", "outcome", "failed_gates", "rule_version", {taken}, {closed}, COUNT(*) '
            f'FROM "{_ENTRY}" WHERE "evaluated_at" >= {p} AND "evaluated_at" < {p}{version} '
            f"GROUP BY 1, 2, 3, 4, 5, 6, 7"
        )

    params: list[Any] = [window_seconds, _AT(closed_at_or_before), _AT(since), _AT(until)]
    if by_version:
        params.append(rule_version)
    return [
        (stored_day(day), role, outcome, failed, version, bool(taken), bool(closed), int(count))
        for day, role, outcome, failed, version, taken, closed, count in statements.all_rows(
            ("scorecard_tally", by_version), sql, params
        )
    ]


def kept_days(window_seconds: int, first: date, last: date, *, prefixes: tuple[str, ...]) -> dict[date, dict[str, int]]:
    """The kept counts of the days from `first` to `last` (inclusive) for this window, of the keys that start with
    one of `prefixes`: day -> key -> count."""
    return _kept(_DAY, "day", window_seconds, first, last, prefixes)


def kept_weeks(
    window_seconds: int, first: date, last: date, *, prefixes: tuple[str, ...]
) -> dict[date, dict[str, int]]:
    """The kept sums of the weeks whose Mondays are from `first` to `last` (inclusive), of the keys that start with
    one of `prefixes`: week -> key -> count. Ask only for weeks whose every day is counted (a week's row holds the
    days of it counted so far)."""
    return _kept(_WEEK, "week", window_seconds, first, last, prefixes)


def _kept(
    table: str, column: str, window_seconds: int, first: date, last: date, prefixes: tuple[str, ...]
) -> dict[date, dict[str, int]]:
    def sql(p: str) -> str:
        keys = " OR ".join(f'"key" LIKE {p}' for _ in prefixes)
        return (
            f'SELECT "{column}", "key", "count" FROM "{table}" WHERE "window_seconds" = {p} AND "{column}" >= {p} '
            f'AND "{column}" <= {p} AND ({keys})'
        )

    params: list[Any] = [window_seconds, _DAY_TEXT(first), _DAY_TEXT(last), *(_like_prefix(p) for p in prefixes)]
    found: dict[date, dict[str, int]] = {}
    for when, key, count in statements.all_rows(("scorecard_kept", table, len(prefixes)), sql, params):
        found.setdefault(stored_day(when), {})[key] = count
    return found


def _like_prefix(prefix: str) -> str:
    """The LIKE pattern of the keys that start with `prefix` (`rule:`, `version:<hex>:`: no wildcard in them)."""
    if not prefix or "%" in prefix or "_" in prefix:
        raise ValueError(f"a key prefix without LIKE's wildcards, not {prefix!r}")
    return prefix + "%"


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


def keep_days(
    window_seconds: int,
    counted: dict[date, dict[str, int]],
    *,
    weeks: dict[date, dict[str, int]],
    through: date,
    version: int,
) -> bool:
    """Keep the counts of settled days (day -> key -> count; only days with entries), add their sums by week
    (`weeks`: Monday -> key -> count) to the weeks' kept sums, and move the mark to `through`, if the mark is still
    at `version` (what the counting read); else keep nothing and say so (False): the days were dropped meanwhile
    (`drop_days_from`), and must be counted again."""
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
    # A week counted over two steps: its second part adds to the first's sums.
    summed = [
        {"window_seconds": window_seconds, "week": week, "key": key, "count": count}
        for week, counts in weeks.items()
        for key, count in counts.items()
    ]
    for start in range(0, len(summed), 500):
        (
            ScorecardWeek.insert_many(summed[start : start + 500])
            .on_conflict(
                conflict_target=[ScorecardWeek.window_seconds, ScorecardWeek.week, ScorecardWeek.key],
                update={ScorecardWeek.count: ScorecardWeek.count + EXCLUDED.count},
            )
            .execute()
        )
    return True


def drop_days_from(day: date, window_seconds: tuple[int, ...]) -> None:
    """Entries were recorded or taken up at a past time, on `day` (YYYY-MM-DD) or later: the counts kept from that
    day on are dropped, the weeks' sums from the next Monday on (the week that `day` cuts loses only the dropped
    days' counts), and each window's mark moves back before it (and is bumped even where it was not that far, so
    that a count in progress, which read the entries before these, is never kept)."""
    previous = ScorecardMark.through.db_value(day - timedelta(days=1))  # a value of a CASE is not converted
    monday = day - timedelta(days=day.weekday())
    if monday < day:
        next_monday = monday + timedelta(days=7)
        statements.execute(
            ("scorecard_week_cut",),
            lambda p: (
                f'UPDATE "{_WEEK}" SET "count" = "count" - COALESCE((SELECT SUM("d"."count") FROM "{_DAY}" AS "d" '
                f'WHERE "d"."window_seconds" = "{_WEEK}"."window_seconds" AND "d"."key" = "{_WEEK}"."key" '
                f'AND "d"."day" >= {p} AND "d"."day" < {p}), 0) WHERE "week" = {p}'
            ),
            [_DAY_TEXT(day), _DAY_TEXT(next_monday), _DAY_TEXT(monday)],
        )
        ScorecardWeek.delete().where((ScorecardWeek.week == monday) & (ScorecardWeek.count <= 0)).execute()
        ScorecardWeek.delete().where(ScorecardWeek.week >= next_monday).execute()
    else:
        ScorecardWeek.delete().where(ScorecardWeek.week >= day).execute()
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
