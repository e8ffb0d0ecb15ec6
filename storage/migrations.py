"""Schema creation and migrations, run on every start and safe to run twice (or by two processes at once).

Each migration is a numbered function recorded in `schema_version` once applied. All of them run inside one
transaction that first takes a lock (`BEGIN IMMEDIATE` on SQLite, an advisory lock on PostgreSQL), so two
processes starting together never apply one twice. A migration must itself be idempotent: a fresh database
gets today's tables from migration 1, and later migrations check before they add.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from playhouse.migrate import SchemaMigrator
from playhouse.migrate import migrate as apply_operations

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


def _accounts_and_attribution() -> None:
    """People's accounts, and who last changed each initiative and the wallet.

    On a database that migration 1 created from today's models the columns are there already, so each is added
    only where it is missing.
    """
    models.Account.create_table(safe=True)
    migrator = SchemaMigrator.from_database(db)
    wanted = [(models.Initiative, "updated_by"), (models.Wallet, "updated_by")]
    operations = [
        migrator.add_column(model._meta.table_name, column, model._meta.fields[column])
        for model, column in wanted
        if column not in {c.name for c in db.get_columns(model._meta.table_name)}
    ]
    if operations:
        apply_operations(*operations)


MIGRATIONS: list[tuple[int, str, Callable[[], None]]] = [
    (1, "initial schema", _initial_schema),
    (2, "stage counts kept with every stage change", _stage_counts),
    (3, "people's accounts; who changed initiatives and the wallet", _accounts_and_attribution),
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
