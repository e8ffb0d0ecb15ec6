"""Schema creation and migrations, run on every start and safe to run twice (or by two processes at once).

Each migration is a numbered function recorded in `schema_version` once applied. All of them run inside one
transaction that first takes a lock (`BEGIN IMMEDIATE` on SQLite, an advisory lock on PostgreSQL), so two
processes starting together never apply one twice. A migration must itself be idempotent: a fresh database
gets today's tables from migration 1, and later migrations check before they add.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from storage import models, tickets
from storage.db import connection, db, is_postgres

# pg_advisory_xact_lock key: any constant that no other application on the database uses.
_PG_LOCK_KEY = 0x5C5D_0001


def _initial_schema() -> None:
    db.create_tables(models.ALL_MODELS, safe=True)
    now = datetime.now(UTC)
    models.Wallet.insert(id=1, budget=0.0, spent=0.0, locked=False, updated_at=now).on_conflict_ignore().execute()


def _stage_counts() -> None:
    models.StageCount.create_table(safe=True)
    tickets.recount()


MIGRATIONS: list[tuple[int, str, Callable[[], None]]] = [
    (1, "initial schema", _initial_schema),
    (2, "stage counts kept with every stage change", _stage_counts),
]


def migrate() -> list[int]:
    """Apply every migration not yet recorded; return the versions applied now."""
    applied_now: list[int] = []
    with connection(), db.atomic():
        if is_postgres():
            db.execute_sql("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK_KEY,))
        models.SchemaVersion.create_table(safe=True)
        done = {row.version for row in models.SchemaVersion.select(models.SchemaVersion.version)}
        for version, _name, apply in MIGRATIONS:
            if version in done:
                continue
            apply()
            models.SchemaVersion.create(version=version, applied_at=datetime.now(UTC))
            applied_now.append(version)
    return applied_now


def current_version() -> int:
    with connection():
        row = (
            models.SchemaVersion.select(models.SchemaVersion.version)
            .order_by(models.SchemaVersion.version.desc())
            .first()
        )
    return row.version if row else 0
