"""Shared fixtures. The database backend is chosen by SVC_TEST_DATABASE:

- unset or `sqlite`: a fresh SQLite file per test;
- a `postgresql://` URL: a fresh database created for this session on that server, emptied between tests.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from fakes import FakeClock
from testclient import ApiClient

BACKEND = os.environ.get("SVC_TEST_DATABASE", "sqlite").strip() or "sqlite"
# `make test` runs every test on SQLite, then on PostgreSQL with this set: the second run takes only the tests marked
# `both_backends`, those whose result depends on the database (storage, races, scale-out, outage, crash safety,
# backup, reconcile, the fuzz of writing operations). The others would do exactly what they did in the first run;
# `make test-postgres` runs them all on PostgreSQL. tests/test_suite_split.py keeps the marking honest.
BOTH_BACKENDS_ONLY = os.environ.get("SVC_TEST_BOTH_BACKENDS_ONLY") == "1"
CI_SECRET = "test-ci-secret-0123456789abcdef"
BASIC = "admin:correct-horse-battery"
# argon2id at its cheapest for every password the suite hashes, as healthchecks' test runner swaps its hasher "for
# speed": production's cost is 0.2-0.4 s an account on this machine. The apps the tests build read it from their
# config (`config_factory`), the `svc` processes they start from their environment (`processes.svc_env`), and a
# test adding an account in-process hashes with PASSWORDS. tests/domain/test_accounts.py keeps production's cost.
CHEAP_PASSWORD_HASHING = {
    "SVC_PASSWORD_TIME_COST": "1",
    "SVC_PASSWORD_MEMORY_KIB": "8",
    "SVC_PASSWORD_PARALLELISM": "1",
}


def _cheap_passwords():
    from domain.accounts import Passwords
    from domain.config import Config

    return Passwords.from_config(Config.from_env(CHEAP_PASSWORD_HASHING))


PASSWORDS = _cheap_passwords()


def pytest_report_header(config):
    if BACKEND == "sqlite":
        lines = ["svc database backend: SQLite (a fresh file per test)"]
    else:
        parts = urlsplit(BACKEND)
        lines = [f"svc database backend: PostgreSQL at {parts.hostname}:{parts.port or 5432}"]
    if BOTH_BACKENDS_ONLY:
        lines.append(
            "svc: only the tests marked both_backends run here (SVC_TEST_BOTH_BACKENDS_ONLY=1); the others ran in the "
            "first backend's run and are deselected"
        )
    return lines


def pytest_collection_modifyitems(config, items):
    for item in items:
        if {"module_database_url", "database_url"} <= set(getattr(item, "fixturenames", ())):
            raise pytest.UsageError(
                f"{item.nodeid} asks for database_url beside module_database_url: on PostgreSQL both are this "
                "worker's database, and database_url empties it under the module's fixture"
            )
    if not BOTH_BACKENDS_ONLY:
        return
    kept = [item for item in items if item.get_closest_marker("both_backends") is not None]
    config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("both_backends") is None])
    items[:] = kept


def _postgres_admin_query(sql: str) -> None:
    import psycopg

    with psycopg.connect(BACKEND, autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture(scope="session")
def session_database_url():
    """For PostgreSQL, one database for the whole session (tables are emptied between tests)."""
    if BACKEND == "sqlite":
        yield None
        return
    name = f"svc_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    _postgres_admin_query(f'CREATE DATABASE "{name}"')
    # A commit answered before its WAL reaches the disk (1-2 ms a commit saved): only a crash of the PostgreSQL
    # server itself could lose one, and no test crashes the server (crash-safety tests kill svc, not PostgreSQL).
    _postgres_admin_query(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    parts = urlsplit(BACKEND)
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))
    try:
        yield url
    finally:
        from storage import db as storage_db

        if storage_db.db.obj is not None:
            storage_db.db.close_all() if hasattr(storage_db.db.obj, "close_all") else storage_db.db.close()
        _postgres_admin_query(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session", autouse=True)
def sqlite_template(tmp_path_factory) -> Path | None:
    """On SQLite, a database migrated once per test process: each test starts from a copy of the file, which
    costs a millisecond where migrating a fresh file cost twenty. Made before any test runs (autouse), closed, and
    the models unbound again, so nothing can write to it afterwards."""
    if BACKEND != "sqlite":
        return None
    from storage import db as storage_db
    from storage import migrations

    path = tmp_path_factory.mktemp("template") / "svc.sqlite3"
    database = storage_db.open_database(f"sqlite:///{path}")
    storage_db.bind(database)
    migrations.migrate()
    database.close_all()
    storage_db.db.initialize(None)
    assert not path.with_name(path.name + "-wal").exists()
    return path


@pytest.fixture
def database_url(tmp_path: Path, session_database_url: str | None, sqlite_template: Path | None) -> str:
    if session_database_url is None:
        path = tmp_path / "svc.sqlite3"
        shutil.copyfile(sqlite_template, path)
        return f"sqlite:///{path}"
    _empty_postgres(session_database_url)
    return session_database_url


@pytest.fixture(scope="module")
def module_database_url(tmp_path_factory, session_database_url: str | None, sqlite_template: Path | None) -> str:
    """A database for one module whose tests only read what a module-scoped fixture put there once (a server filled
    once, the demo): a copy of the migrated template on SQLite; on PostgreSQL this worker's database, emptied now.
    pytest ends a module's fixtures before another module's tests run, so no other test empties it meanwhile; a test
    using it must not also ask for `database_url`, which empties the same PostgreSQL database."""
    if session_database_url is None:
        path = tmp_path_factory.mktemp("module") / "svc.sqlite3"
        shutil.copyfile(sqlite_template, path)
        return f"sqlite:///{path}"
    _empty_postgres(session_database_url)
    return session_database_url


def _empty_postgres(url: str) -> None:
    import psycopg

    # The schema stays at its version (migrations run once per database, as in production); the wallet keeps
    # its one row, reset, as `svc demo --force` leaves it. DELETE, children first, and sequences restarted: a
    # few milliseconds, where a TRUNCATE of every table took ~70 (it gives each table a new file) before each test.
    with psycopg.connect(url, autocommit=True) as conn:
        statements = _emptying_statements(conn, url)
        if statements:
            with conn.transaction():
                conn.execute("; ".join(statements))


_EMPTYING: dict[str, list[str]] = {}


def _emptying_statements(conn, url: str) -> list[str]:
    """The statements that empty the database at `url`, worked out once per schema version it is at."""
    version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] if _has_schema(conn) else None
    key = f"{url}#{version}"
    if key not in _EMPTYING:
        kept = {"schema_version", "wallet"}
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        refers = conn.execute(
            "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint WHERE contype = 'f'"
        ).fetchall()
        order = _children_first([t for t in tables if t not in kept], [(a.strip('"'), b.strip('"')) for a, b in refers])
        sequences = [r[0] for r in conn.execute("SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'")]
        # Names from the database's own catalog, never from input.
        statements = [f'DELETE FROM "{t}"' for t in order]  # noqa: S608
        statements += [f'ALTER SEQUENCE "{s}" RESTART' for s in sequences]
        if "wallet" in tables:
            statements.append("UPDATE wallet SET budget = 0, spent = 0, locked = false")
        _EMPTYING[key] = statements
    return _EMPTYING[key]


def _has_schema(conn) -> bool:
    return conn.execute("SELECT to_regclass('public.schema_version') IS NOT NULL").fetchone()[0]


def _children_first(tables: list[str], refers: list[tuple[str, str]]) -> list[str]:
    """`tables` ordered so that a table comes before every table it refers to (its rows go first)."""
    ordered: list[str] = []
    left = set(tables)
    while left:
        ready = sorted(
            t for t in left if not any(child in left and child != t for child, parent in refers if parent == t)
        )
        if not ready:  # a cycle: leave the rest in name order
            ready = sorted(left)
        ordered.extend(ready)
        left -= set(ready)
    return ordered


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def config_factory(tmp_path: Path, database_url: str):
    from domain.config import Config

    def make(**overrides) -> Config:
        values = dict(
            data_dir=tmp_path,
            database_url=database_url,
            ci_webhook_secret=CI_SECRET,
            basic_auth=BASIC,
            # Tests read the snapshot right after changing the board on a clock that stands still.
            snapshot_max_age=0,
            password_time_cost=PASSWORDS.hasher.time_cost,
            password_memory_kib=PASSWORDS.hasher.memory_cost,
            password_parallelism=PASSWORDS.hasher.parallelism,
        )
        values.update(overrides)
        return Config(**values)

    return make


@pytest.fixture
def config(config_factory):
    return config_factory()


@pytest.fixture
def app_factory(clock, config):
    from api import create_app
    from storage import db as storage_db

    made = []

    def make(cfg=None, **kwargs):
        app = create_app(cfg or config, clock=kwargs.pop("clock", clock), **kwargs)
        made.append(app)
        return app

    yield make
    obj = storage_db.db.obj
    if obj is not None:
        if hasattr(obj, "close_all"):
            obj.close_all()
        elif not obj.is_closed():
            obj.close()


@pytest.fixture
def app(app_factory):
    return app_factory()


@pytest.fixture
def api(app) -> ApiClient:
    """An HTTP client on the app that checks every response against the app's own OpenAPI document."""
    return ApiClient(app, basic=BASIC, ci_secret=CI_SECRET)


@pytest.fixture
def db_session(app):
    """A connection for a test that reads rows directly."""
    from storage.db import connection

    with connection():
        yield


@pytest.fixture(scope="session")
def browser():
    """One browser per test process (each xdist worker has its own), for every browser test wherever it lives:
    Playwright's sync API runs one at a time in a process. Every test opens its own contexts in it."""
    from browser_kit import chromium_browser

    yield from chromium_browser()


@pytest.fixture
def chromium(browser):
    """The browser, for one test: whatever contexts the test leaves open (a failure before its `context.close()`)
    are closed after it, so no page of one test goes on asking a server while the next one runs."""
    yield browser
    for context in browser.contexts:
        context.close()
