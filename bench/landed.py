"""What a benchmark's requests left in the database, checked against what the load generator was answered.

A figure means what it says only if every request was the work it claims: each event a new id (not an
idempotent replay of another thread's), each acknowledged notify a run and a receipt on disk. wrk stops with
requests in flight, which the server may still have committed; so rows may exceed acknowledgements by at most
the number of connections, never fall short of them.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from harness import Load
from peewee import SqliteDatabase, fn

from storage import db as storage_db
from storage.models import AcceptedEvent, AgentRun, RouterDecision, TimelineEntry

T = TypeVar("T")


@dataclass
class Mark:
    """The highest ids before a load, so that only its own rows are counted after it."""

    run_id: int
    entry_id: int
    decision_id: int


def within(database: Path, check: Callable[..., T], *args) -> T:
    """`check(*args)` against another SQLite database of the service's schema (the ceiling app's)."""
    previous = storage_db.db.obj
    other = SqliteDatabase(str(database), pragmas={"journal_mode": "wal"})
    storage_db.bind(other)
    try:
        return check(*args)
    finally:
        storage_db.bind(previous)
        other.close()


def mark() -> Mark:
    with storage_db.connection():
        return Mark(
            AgentRun.select(fn.MAX(AgentRun.id)).scalar() or 0,
            TimelineEntry.select(fn.MAX(TimelineEntry.id)).scalar() or 0,
            RouterDecision.select(fn.MAX(RouterDecision.id)).scalar() or 0,
        )


@dataclass
class Check:
    ok: bool
    text: str


def _settled(count: Callable[[], T], *, timeout: float = 10.0) -> T:
    """The counts once the requests in flight when the load stopped have landed: two reads 0.2 s apart agree."""
    deadline = time.monotonic() + timeout
    before = count()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = count()
        if now == before:
            return now
        before = now
    return before


def settled(marker: Callable[[], T]) -> T:
    """`marker()` once the requests still in flight from an earlier load (a warm-up) have landed."""
    return _settled(marker)


def _in_flight(landed: int, acknowledged: int, connections: int) -> tuple[bool, str]:
    extra = landed - acknowledged
    if extra < 0:
        return False, f"{-extra:,} acknowledged but not recorded"
    if extra > connections:
        return False, f"{extra:,} recorded beyond the acknowledged, more than the {connections} connections in flight"
    return True, f"{extra} in flight when the load stopped"


def notify(load: Load, before: Mark, connections: int = 16) -> Check:
    """Each 200 is one writing-daily run and one receipt on WRITING-DAILY."""

    def count() -> tuple[int, ...]:
        with storage_db.connection():
            runs = AgentRun.select().where((AgentRun.id > before.run_id) & (AgentRun.agent_id == "writing-daily"))
            receipts = TimelineEntry.select().where(
                (TimelineEntry.id > before.entry_id)
                & (TimelineEntry.ticket == "WRITING-DAILY")
                & (TimelineEntry.kind == "writing_report")
            )
            return runs.count(), receipts.count()

    runs, receipts = _settled(count)
    acknowledged = load.answered(200)
    others = load.requests - acknowledged
    flight_ok, flight = _in_flight(runs, acknowledged, connections)
    ok = others == 0 and runs == receipts and flight_ok
    text = f"{acknowledged:,} answered 200, {others:,} otherwise; landed {runs:,} runs and {receipts:,} receipts"
    text += f" ({flight})"
    return Check(ok, text)


def events(load: Load, before: Mark, connections: int = 16) -> Check:
    """Each 202 is one new decision under a distinct event id; no 200 (a replay of an id already seen)."""
    prefix = f"bench-{load.tag}-"

    def count() -> tuple[int, ...]:
        with storage_db.connection():
            mine = (RouterDecision.id > before.decision_id) & RouterDecision.event_id.startswith(prefix)
            decisions = RouterDecision.select().where(mine).count()
            distinct = RouterDecision.select(fn.COUNT(RouterDecision.event_id.distinct())).where(mine).scalar() or 0
            accepted = AcceptedEvent.select().where(AcceptedEvent.event_id.startswith(prefix)).count()
            return decisions, distinct, accepted

    decisions, distinct, accepted = _settled(count)
    new, replays = load.answered(202), load.answered(200)
    others = load.requests - new - replays
    flight_ok, flight = _in_flight(decisions, new, connections)
    ok = replays == 0 and others == 0 and decisions == distinct == accepted and flight_ok
    text = (
        f"{new:,} answered 202, {replays:,} replays (200), {others:,} otherwise; landed {decisions:,} decisions "
        f"under {distinct:,} distinct ids, {accepted:,} accepted ({flight})"
    )
    return Check(ok, text)


def reads(load: Load) -> Check:
    """A read (or the bare app) must answer 200 every time."""
    good = load.answered(200)
    others = load.requests - good
    return Check(others == 0 and load.errors == 0, f"{good:,} answered 200, {others:,} otherwise")


def floor_mark(database: Path) -> int:
    """The floor app's highest run id, so that only a load's own rows are counted after it."""
    with contextlib.closing(sqlite3.connect(database)) as conn:
        return conn.execute("SELECT COALESCE(MAX(id), 0) FROM run").fetchone()[0]


def floor(load: Load, before: int, database: Path, connections: int = 16) -> Check:
    """Each 200 of the floor app is one run, one receipt and one outbox row, committed."""

    def count() -> tuple[int, ...]:
        with contextlib.closing(sqlite3.connect(database)) as conn:
            runs = conn.execute("SELECT COUNT(*) FROM run WHERE id > ?", (before,)).fetchone()[0]
            receipts = conn.execute("SELECT COUNT(*) FROM receipt WHERE id > ?", (before,)).fetchone()[0]
            outbox = conn.execute("SELECT COUNT(*) FROM outbox WHERE id > ?", (before,)).fetchone()[0]
            return runs, receipts, outbox

    runs, receipts, outbox = _settled(count)
    acknowledged = load.answered(200)
    others = load.requests - acknowledged
    flight_ok, flight = _in_flight(runs, acknowledged, connections)
    ok = others == 0 and runs == receipts == outbox and flight_ok
    text = (
        f"{acknowledged:,} answered 200, {others:,} otherwise; landed {runs:,} runs, {receipts:,} receipts and "
        f"{outbox:,} outbox rows ({flight})"
    )
    return Check(ok, text)
