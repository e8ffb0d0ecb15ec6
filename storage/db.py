"""The database behind the models: SQLite (WAL, durable) by default, PostgreSQL through DATABASE_URL.

Models are bound to `db`, a `DatabaseProxy`; nothing connects at import time. `open_database()` builds
the real database from a URL and `bind()` points the proxy at it.
"""

from __future__ import annotations

import _thread
import contextlib
import queue
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from peewee import DatabaseProxy, InterfaceError, OperationalError, PostgresqlDatabase, SqliteDatabase
from playhouse.db_url import parse as parse_db_url
from playhouse.pool import MaxConnectionsExceeded, PooledPostgresqlDatabase, PooledSqliteDatabase

db = DatabaseProxy()
T = TypeVar("T")

# WAL lets readers run beside the one writer; synchronous=FULL makes each commit durable (fsync of the WAL)
# before the API acknowledges it; busy_timeout makes a second writer wait instead of failing at once. The page
# cache is SQLite's default 2 MB *per connection*: with a pool of a dozen, 16 MB each let a server's memory
# grow by ~200 MB as the database grew (the file itself stays in the operating system's cache anyway).
SQLITE_PRAGMAS = {
    "journal_mode": "wal",
    "synchronous": "full",
    "busy_timeout": 10_000,
    "foreign_keys": 1,
    "cache_size": -2_000,
    "temp_store": "memory",
}

_POSTGRES_SCHEMES = {"postgres", "postgresql"}


def open_database(url: str, *, max_connections: int = 32) -> SqliteDatabase | PostgresqlDatabase:
    """Build (but do not connect) the database named by `url`."""
    scheme = urlsplit(url).scheme
    params = parse_db_url(url)
    if scheme == "sqlite":
        path = params.pop("database")
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # Every write transaction takes the write lock up front (BEGIN IMMEDIATE): a deferred transaction that
        # upgrades later can fail with "database is locked" without waiting for busy_timeout. Connections are
        # pooled: opening one costs more than most requests (the WAL pragmas run on every new connection).
        return PooledSqliteDatabase(
            path,
            max_connections=max_connections,
            stale_timeout=600,
            pragmas=SQLITE_PRAGMAS,
            lock_type="IMMEDIATE",
            timeout=10,
            check_same_thread=False,
            **params,
        )
    if scheme in _POSTGRES_SCHEMES:
        name = params.pop("database")
        return PooledPostgresqlDatabase(
            name,
            max_connections=max_connections,
            stale_timeout=300,
            timeout=10,
            autorollback=False,
            **params,
        )
    raise ValueError(f"unsupported database scheme {scheme!r}")


def bind(database: SqliteDatabase | PostgresqlDatabase) -> None:
    """Point every model at `database` (the old database's writer thread finishes its batch first)."""
    _stop_group_commit()
    db.initialize(database)


def is_postgres() -> bool:
    return isinstance(db.obj, PostgresqlDatabase)


@contextlib.contextmanager
def connection() -> Iterator[None]:
    """Hold a connection for the current thread for the duration of the block (reused if already open)."""
    opened = db.connect(reuse_if_open=True)
    try:
        yield
    finally:
        if opened and not db.is_closed():
            db.close()


# SQLite has one writer at a time. Threads of this process queue on a lock instead of in SQLite's busy
# handler, which sleeps in growing steps (up to 100 ms) and gives writes a long latency tail. Other
# processes (the jobs process) still wait through busy_timeout.
_sqlite_writer = threading.RLock()


def transaction() -> _Transaction:
    """One unit of work: `with transaction(): ...` commits on success and rolls back on any exception."""
    return _Transaction()


class _Transaction:
    """`transaction()`'s context (a class: every unit of work enters one, and a generator-based context costs more).

    PostgreSQL: a transaction, or a savepoint inside one. SQLite on the group-commit writer: the unit's own part
    of the batch's transaction (see `GroupCommit.begin_unit`). SQLite elsewhere: the process's writer lock and a
    transaction (or a savepoint inside one).
    """

    __slots__ = ("atomic", "group", "locked", "mark")

    def __enter__(self) -> None:
        self.group = self.atomic = None
        self.locked = False
        if not isinstance(db.obj, PostgresqlDatabase):
            group = _group
            if group is not None and group.batch_open and threading.get_ident() == group.ident:
                self.group = group
                self.mark = group.begin_unit()
                return
            _sqlite_writer.acquire()
            self.locked = True
        try:
            self.atomic = db.atomic()
            self.atomic.__enter__()
        except BaseException:
            if self.locked:
                _sqlite_writer.release()
            raise

    def __exit__(self, kind, error, trace) -> bool:
        if self.group is not None:
            self.group.end_unit(self.mark, failed=kind is not None)
            return False
        try:
            return bool(self.atomic.__exit__(kind, error, trace))
        finally:
            if self.locked:
                _sqlite_writer.release()


class GroupCommitClosed(RuntimeError):
    """The group commit was replaced (the database was rebound); the caller submits to the new one."""


class _Unit:
    """A unit of work waiting for the writer: its lock is held until the writer has its outcome committed (a plain
    lock released once is the cheapest hand-off back: a `Future` takes a condition variable and its own lock)."""

    __slots__ = ("done", "error", "fn", "value")

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.value: Any = None
        self.error: BaseException | None = None


class GroupCommit:
    """SQLite's group commit: one writer thread runs the units of work that are waiting, one after another in
    one transaction (each after the first in its own savepoint), and answers them all after a single commit.

    A commit with `synchronous=FULL` costs an fsync, which is most of a small write's time. While the writer
    waits for one, request threads queue the next units, so under load one fsync carries many of them; alone,
    a unit commits by itself at once. Nothing is answered before its commit is on disk, and a unit that fails
    rolls back to its savepoint without touching the others in its batch.
    """

    MAX_BATCH = 128
    # One name for every unit's savepoint: SQLite resolves a name to the innermost savepoint that has it, and a
    # fixed text is prepared once (peewee names each savepoint anew, so each was prepared again).
    SAVEPOINT, RELEASE, ROLLBACK_TO = 'SAVEPOINT "unit"', 'RELEASE "unit"', 'ROLLBACK TO "unit"'

    def __init__(self, database: SqliteDatabase):
        self.database = database
        # While a batch's transaction is open on the writer thread: True until a unit has written in it.
        self.batch_open = False
        self._fresh = False
        self.ident: int | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="sqlite-group-commit", daemon=True)
        self._thread.start()

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def submit(self, fn: Callable[[], T]) -> T:
        unit = _Unit(fn)
        with self._lock:  # nothing is queued behind the stop sentinel, so nothing waits forever
            if self._closed:
                raise GroupCommitClosed
            self._queue.put(unit)
        unit.done.acquire()  # released by the writer once the outcome is known (after the commit)
        if unit.error is not None:
            raise unit.error
        return unit.value

    def stop(self, *, wait: bool = True) -> None:
        """Finish what is queued, then end the writer thread (and close its connection)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put(None)
        if wait and threading.current_thread() is not self._thread:
            self._thread.join()

    def begin_unit(self) -> bool:
        """Begin a unit's own transaction inside the batch's, on the writer thread; True when it took a savepoint.

        The batch's first unit needs no savepoint: when it fails, nothing else is in the transaction, so the
        whole transaction is rolled back and begun again. Every later unit (or a transaction nested in a unit)
        gets a savepoint, so a failure takes back only itself.
        """
        if self._fresh:
            self._fresh = False
            return False
        self.database.connection().execute(self.SAVEPOINT)
        return True

    def end_unit(self, savepoint: bool, *, failed: bool) -> None:
        conn = self.database.connection()
        if not failed:
            if savepoint:
                conn.execute(self.RELEASE)
            return
        if not conn.in_transaction:  # SQLite ended the whole transaction itself, and the batch fails
            return
        if savepoint:
            conn.execute(self.ROLLBACK_TO)
            conn.execute(self.RELEASE)
        else:
            conn.execute("ROLLBACK")
            conn.execute("BEGIN IMMEDIATE")
            self._fresh = True

    def _loop(self) -> None:
        self.ident = threading.get_ident()
        while True:
            item = self._queue.get()
            if item is None:
                break
            self._run([item])
        if not self.database.is_closed():
            self.database.close()

    @contextlib.contextmanager
    def _open(self) -> Iterator[None]:
        self.batch_open = self._fresh = True
        try:
            yield
        finally:
            self.batch_open = self._fresh = False

    def _take_waiting(self, batch: list) -> None:
        """Move the units queued meanwhile into `batch` (up to `MAX_BATCH`), stopping at the stop sentinel."""
        while len(batch) < self.MAX_BATCH:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is None:
                self._queue.put(None)  # stop after this batch
                return
            batch.append(item)

    def _run(self, batch: list[_Unit]) -> None:
        try:
            self.database.connect(reuse_if_open=True)
            with _sqlite_writer, self.database.atomic(), self._open():
                ran = 0
                while True:
                    if ran == len(batch):
                        # What was queued while these ran joins the same commit: it would otherwise wait for
                        # this fsync and then pay one of its own.
                        self._take_waiting(batch)
                        if ran == len(batch):
                            break
                    unit = batch[ran]
                    ran += 1
                    # Each unit writes inside its own `transaction()`, a savepoint here: a failing unit has
                    # taken back only itself by the time its exception arrives.
                    try:
                        unit.value = unit.fn()
                    except BaseException as exc:  # handed to the caller, who raises it
                        if not self.database.connection().in_transaction:
                            # SQLite ended the whole transaction itself (disk full, I/O error): the units before
                            # this one are gone too, and the ones after would commit on their own. Fail them all.
                            raise
                        unit.error = exc
        except BaseException as exc:  # BEGIN or COMMIT failed, or the transaction was lost: nothing happened
            for unit in batch:
                unit.value, unit.error = None, exc
        for unit in batch:
            unit.done.release()


_group: GroupCommit | None = None
_group_lock = threading.Lock()


def _group_commit() -> GroupCommit:
    global _group
    with _group_lock:
        if _group is None or _group.database is not db.obj:
            if _group is not None:
                _group.stop(wait=False)
            _group = GroupCommit(db.obj)
        return _group


def _stop_group_commit() -> None:
    global _group
    with _group_lock:
        group, _group = _group, None
    if group is not None:
        group.stop()


def write(fn: Callable[[], T]) -> T:
    """Run `fn`, a unit of work that writes only inside its own `transaction()`, and return its result once
    committed.

    On SQLite, concurrent callers share commits: `fn` runs on the writer thread inside the group's transaction,
    where its own `transaction()` is a savepoint (see `GroupCommit`). On PostgreSQL, which groups commits itself,
    `fn` runs in this thread and its `transaction()` is a real one. Inside a transaction already (or on the
    writer thread itself) `fn` simply runs there, as part of it.
    """
    if isinstance(db.obj, PostgresqlDatabase) or db.in_transaction():
        return fn()
    while True:
        group = _group_commit()
        if threading.current_thread() is group.thread:
            return fn()
        try:
            return group.submit(fn)
        except GroupCommitClosed:
            continue  # the database was rebound while we got here: submit to the new writer


def sqlite_path() -> Path | None:
    """The file of the bound SQLite database, or None (PostgreSQL, or SQLite in memory)."""
    if isinstance(db.obj, SqliteDatabase) and db.obj.database != ":memory:":
        return Path(db.obj.database)
    return None


def ping() -> tuple[bool, str]:
    """Run a trivial query; (ok, detail) for /healthz and the pulse."""
    try:
        with connection():
            db.execute_sql("SELECT 1").fetchone()
        return True, "database reachable"
    except (OperationalError, InterfaceError) as exc:
        return False, f"database unreachable: {type(exc).__name__}"


# SQLite's primary result codes that say the database cannot be used just now, rather than that a statement is
# wrong: BUSY and LOCKED (locked past the busy timeout), NOMEM, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL.
_SQLITE_OUTAGE_CODES = frozenset({5, 6, 7, 8, 10, 13, 14, 15})
_SQLITE_DISK_CODES = frozenset({10, 13})  # IOERR, FULL: the disk under the database refuses the write
UNREACHABLE, CANNOT_WRITE, DISK = "unreachable", "cannot-write", "disk"


def outage_cause(exc: BaseException) -> tuple[str, str] | None:
    """(kind, cause) when `exc` means the database cannot be reached or cannot take the write just now (an
    outage: try later), else None (a bug). `cause` is the first cause in the exception's chain: a failed write
    on SQLite is often followed by a failed rollback ("cannot rollback - no transaction is active"), which would
    otherwise hide "database or disk is full". `kind` is `unreachable`, `disk` (full, or an I/O error) or
    `cannot-write` (locked past the busy timeout, read-only)."""
    chain: list[BaseException] = []
    while exc is not None and all(exc is not seen for seen in chain):
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    for error in reversed(chain):  # the first cause first
        found = _outage(error)
        if found is not None:
            return found
    return None


def _outage(error: BaseException) -> tuple[str, str] | None:
    if isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)
        if code is None or code & 0xFF not in _SQLITE_OUTAGE_CODES:
            return None
        kind = DISK if code & 0xFF in _SQLITE_DISK_CODES else UNREACHABLE if code & 0xFF == 14 else CANNOT_WRITE
        return kind, f"SQLite: {_first_line(error)}"
    if isinstance(error, MaxConnectionsExceeded):
        return UNREACHABLE, "every database connection of this process is in use"
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(error, (psycopg.OperationalError, psycopg.InterfaceError)):
        disk = getattr(error, "sqlstate", None) in {"53100", "58030"}  # disk_full, io_error
        return (DISK if disk else UNREACHABLE), f"PostgreSQL: {_first_line(error)}"
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__
