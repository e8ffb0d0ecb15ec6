"""The database behind the models: SQLite (WAL, durable) by default, PostgreSQL through DATABASE_URL.

Models are bound to `db`, a `DatabaseProxy`; nothing connects at import time. `open_database()` builds
the real database from a URL and `bind()` points the proxy at it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from peewee import DatabaseProxy, InterfaceError, OperationalError, PostgresqlDatabase, SqliteDatabase
from playhouse.db_url import parse as parse_db_url
from playhouse.pool import PooledPostgresqlDatabase, PooledSqliteDatabase

db = DatabaseProxy()

# WAL lets readers run beside the one writer; synchronous=FULL makes each commit durable (fsync of the WAL)
# before the API acknowledges it; busy_timeout makes a second writer wait instead of failing at once.
SQLITE_PRAGMAS = {
    "journal_mode": "wal",
    "synchronous": "full",
    "busy_timeout": 10_000,
    "foreign_keys": 1,
    "cache_size": -16_000,
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
    """Point every model at `database`."""
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


@contextlib.contextmanager
def transaction() -> Iterator[None]:
    """One unit of work: `with transaction(): ...` commits on success and rolls back on any exception."""
    if isinstance(db.obj, PostgresqlDatabase):
        with db.atomic():
            yield
        return
    with _sqlite_writer, db.atomic():
        yield


def ping() -> tuple[bool, str]:
    """Run a trivial query; (ok, detail) for /healthz and the pulse."""
    try:
        with connection():
            db.execute_sql("SELECT 1").fetchone()
        return True, "database reachable"
    except (OperationalError, InterfaceError) as exc:
        return False, f"database unreachable: {type(exc).__name__}"
