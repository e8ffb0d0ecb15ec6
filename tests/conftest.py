"""Shared fixtures. The database backend is chosen by SVC_TEST_DATABASE:

- unset or `sqlite`: a fresh SQLite file per test;
- a `postgresql://` URL: a fresh database created for this session on that server, emptied between tests.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from fakes import FakeClock
from testclient import ApiClient

BACKEND = os.environ.get("SVC_TEST_DATABASE", "sqlite").strip() or "sqlite"
CI_SECRET = "test-ci-secret-0123456789abcdef"
BASIC = "admin:correct-horse-battery"


def pytest_report_header(config):
    if BACKEND == "sqlite":
        return "svc database backend: SQLite (a fresh file per test)"
    parts = urlsplit(BACKEND)
    return f"svc database backend: PostgreSQL at {parts.hostname}:{parts.port or 5432}"


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
    parts = urlsplit(BACKEND)
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))
    try:
        yield url
    finally:
        from storage import db as storage_db

        if storage_db.db.obj is not None:
            storage_db.db.close_all() if hasattr(storage_db.db.obj, "close_all") else storage_db.db.close()
        _postgres_admin_query(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(tmp_path: Path, session_database_url: str | None) -> str:
    if session_database_url is None:
        return f"sqlite:///{tmp_path / 'svc.sqlite3'}"
    _empty_postgres(session_database_url)
    return session_database_url


def _empty_postgres(url: str) -> None:
    import psycopg

    # The schema stays at its version (migrations run once per database, as in production); the wallet keeps
    # its one row, reset, as `svc demo --force` leaves it.
    kept = {"schema_version", "wallet"}
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        emptied = [t for t in tables if t not in kept]
        if emptied:
            conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in emptied) + " RESTART IDENTITY CASCADE")
        if "wallet" in tables:
            conn.execute("UPDATE wallet SET budget = 0, spent = 0, locked = false")


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
