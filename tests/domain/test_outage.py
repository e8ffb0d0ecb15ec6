"""An outage is told from a bug by the first cause of the error, and logged once per outage."""

from __future__ import annotations

import logging
import sqlite3

import peewee

from domain.outage import DatabaseOutage
from storage.db import CANNOT_WRITE, UNREACHABLE, outage_cause


def _failed_write_then_failed_rollback(tmp_path) -> BaseException:
    """A write SQLite refuses, then the rollback that follows it failing too: what a full disk looked like."""
    path = tmp_path / "read-only.sqlite3"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.commit()
    read_only = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        try:
            read_only.execute("INSERT INTO t VALUES (1)")
        except sqlite3.Error:
            read_only.execute("ROLLBACK")
    except sqlite3.Error as exc:
        return exc
    raise AssertionError("the rollback should have failed")


def test_the_first_cause_is_named_not_the_failed_rollback_after_it(tmp_path):
    error = _failed_write_then_failed_rollback(tmp_path)
    assert "cannot rollback" in str(error)
    assert outage_cause(error) == (CANNOT_WRITE, "SQLite: attempt to write a readonly database")


def test_peewees_wrapped_errors_are_read_through_to_the_driver(tmp_path):
    database = peewee.SqliteDatabase(str(tmp_path / "no-such-dir" / "x.sqlite3"))
    try:
        database.connect()
    except peewee.OperationalError as exc:
        assert outage_cause(exc) == (UNREACHABLE, "SQLite: unable to open database file")
    else:
        raise AssertionError("connecting should have failed")


def test_a_wrong_statement_is_a_bug_not_an_outage():
    try:
        sqlite3.connect(":memory:").execute("SELECT * FROM no_such_table")
    except sqlite3.Error as exc:
        assert outage_cause(exc) is None


def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(caplog):
    now = [100.0]
    outage = DatabaseOutage(monotonic=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="svc.database"):
        for _ in range(50):
            outage.failed("disk", "SQLite: database or disk is full")
        outage.recovered(wrote=False)  # a read goes through on a full disk: not over yet
        now[0] += 12
        outage.failed("disk", "SQLite: disk I/O error")  # a later symptom of the same outage
        outage.recovered(wrote=True)
        outage.recovered(wrote=True)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "database unavailable: SQLite: database or disk is full",
        "database available again after 12 s (51 operations failed; first cause: SQLite: database or disk is full)",
    ]
    assert outage.current is None


def test_a_read_ends_an_outage_of_reaching_the_database():
    outage = DatabaseOutage()
    outage.failed(UNREACHABLE, "PostgreSQL: connection refused")
    outage.recovered(wrote=False)
    assert outage.current is None
