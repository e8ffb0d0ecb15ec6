"""Databases at a given schema version, filled with rows; and the live shape of a database's schema, read back
through peewee's introspection, so two databases (or a database and the models) can be compared.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from peewee import Database

from storage import migrations
from storage.db import open_database

AT = "2026-11-20 08:00:00"
# The last day whose decisions the archivist moved out (ROWS["archived_count"], from schema version 12).
ARCHIVED_THROUGH = "2026-10-30"


class ScratchDatabases:
    """Fresh, empty databases on the test backend: SQLite files, or PostgreSQL databases dropped at the end."""

    def __init__(self, tmp_path: Path, backend: str):
        self.tmp_path = tmp_path
        self.backend = backend
        self.made: list[str] = []
        self.opened: list[Database] = []

    def url(self) -> str:
        name = f"svc_scratch_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        if self.backend == "sqlite":
            return f"sqlite:///{self.tmp_path / name}.sqlite3"
        self._admin(f'CREATE DATABASE "{name}"')
        self.made.append(name)
        parts = urlsplit(self.backend)
        return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))

    def connect(self, url: str) -> Database:
        """A database object of its own (not the models' proxy), closed at the end."""
        database = open_database(url, max_connections=4)
        self.opened.append(database)
        return database

    def close(self) -> None:
        for database in self.opened:
            database.close_all() if hasattr(database, "close_all") else database.close()
        for name in self.made:
            self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.backend, autocommit=True) as conn:
            conn.execute(sql)


# -- the live schema -------------------------------------------------------------------------------------------


def live_schema(database: Database) -> dict[str, dict[str, Any]]:
    """Per table: columns (type, nullability, default, primary key), primary key, indexes, foreign keys.

    Column order is left out (a column added by a migration comes last; nothing reads columns by position), and
    so are the indexes every primary key gets under a name the backend chooses."""
    with database.connection_context():
        shape = {}
        for table in database.get_tables():
            columns = {
                c.name: {
                    "type": c.full_type.lower(),
                    "null": c.null,
                    "default": c.default,
                    "pk": c.primary_key,
                    "serial": c.identity,
                }
                for c in database.get_columns(table)
            }
            indexes = sorted(
                (i.name, tuple(i.columns), bool(i.unique))
                for i in database.get_indexes(table)
                if not i.name.startswith("sqlite_autoindex_") and i.name != f"{table}_pkey"
            )
            foreign_keys = sorted(
                (fk.column, fk.dest_table, fk.dest_column, (fk.on_delete or "NO ACTION").upper())
                for fk in database.get_foreign_keys(table)
            )
            shape[table] = {
                "columns": columns,
                "primary_key": database.get_primary_keys(table),
                "indexes": indexes,
                "foreign_keys": foreign_keys,
            }
        return shape


def declared_schema(scratch: ScratchDatabases) -> dict[str, dict[str, Any]]:
    """What the models declare, made real on the test backend (peewee's own CREATE statements) and read back."""
    database = scratch.connect(scratch.url())
    with database.connection_context():
        for statement in migrations.declared_ddl(database):
            database.execute_sql(statement)
    return live_schema(database)


def differences(expected: dict, actual: dict) -> list[str]:
    """Readable differences between two live schemas (empty when they are the same)."""
    found = []
    for table in sorted(set(expected) | set(actual)):
        if table not in actual:
            found.append(f"table {table} is missing")
            continue
        if table not in expected:
            found.append(f"table {table} is not declared by the models")
            continue
        for part in ("columns", "primary_key", "indexes", "foreign_keys"):
            want, have = expected[table][part], actual[table][part]
            if part == "columns":
                for column in sorted(set(want) | set(have)):
                    if want.get(column) != have.get(column):
                        found.append(f"{table}.{column}: declared {want.get(column)}, found {have.get(column)}")
            elif want != have:
                found.append(f"{table} {part}: declared {want}, found {have}")
    return found


# -- a database at a frozen version, with rows ------------------------------------------------------------------

# Rows a board of that time would hold, by table; a table or column not named here (one a later version adds)
# gets values made from its type, so a database built at a newer frozen version is filled too.
ROWS: dict[str, list[dict[str, Any]]] = {
    "initiative": [{"id": "port", "name": "Port", "stage": "active", "created_at": AT, "updated_at": AT}],
    "ticket": [
        {
            "key": key,
            "initiative_id": "port",
            "title": title,
            "stage": stage,
            "waiting_on": waiting_on,
            "needs_you": needs_you,
            "version": 1,
            # Schema version 10: a ticket's queued or running job (see dispatch_job).
            "job_id": 1 if key == "PORT-2" else None,
            "job_state": "running" if key == "PORT-2" else None,
            "stage_changed_at": AT,
            "created_at": AT,
            "updated_at": AT,
        }
        for key, title, stage, waiting_on, needs_you in [
            ("PORT-1", "Port the parser", "queued", None, False),
            ("PORT-2", "Port the printer", "execute", "agent", True),
            ("PORT-3", "Port the tests", "queued", None, False),
            ("PORT-4", "Check the port", "human_test", None, True),
        ]
    ],
    "timeline_entry": [
        {"ticket_key": "PORT-2", "at": AT, "kind": "moved", "summary": "queued → execute", "data": '{"to":"execute"}'}
    ],
    "agent_run": [
        {"agent_id": "pulse", "status": "ok", "ok": True, "started_at": AT, "finished_at": AT, "summary": "all well"}
    ],
    "setting": [{"key": "writing.automation", "value": '{"enabled":true}', "updated_at": AT, "updated_by": "admin"}],
    "slot": [{"name": "bay-1", "created_at": AT, "last_activity_at": AT}],
    # Schema version 3: an admin and the worker of bay-1 (a worker's account is named after its bay). Version 11
    # gives each account a principal of its own (32 hex digits) and a worker its bay.
    "account": [
        {
            "name": name,
            "role": role,
            "password_hash": "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo",
            "created_at": AT,
            "password_changed_at": AT,
            "principal": principal,
            "bay": bay,
        }
        for name, role, principal, bay in [("ada", "admin", "a" * 32, None), ("bay-1", "worker", "b" * 32, "bay-1")]
    ],
    "slot_claim": [{"slot_name": "bay-1", "ticket_key": "PORT-2", "claimed_at": AT}],
    "wallet": [{"id": 1, "budget": 25.0, "spent": 4.5, "locked": False, "updated_at": AT}],
    "outbox_message": [
        {
            "kind": "chat",
            "payload": '{"content":"PORT-2 is in execute"}',
            "status": "sent",
            "attempts": 1,
            "next_attempt_at": AT,
            "created_at": AT,
            "updated_at": AT,
            "sent_at": AT,
        }
    ],
    "idempotency_record": [
        {
            "scope": "tickets",
            "key": "k-1",
            "request_hash": "0" * 64,
            "status_code": 201,
            "response": '{"key":"PORT-3"}',
            "created_at": AT,
        }
    ],
    "router_decision": [
        {
            "event_id": "evt-1",
            "evaluated_at": AT,
            "mode": "shadow",
            "source": "tracker",
            "kind": "state_changed",
            "subject_id": "PORT-2",
            "outcome": "no_action",
            "gates": "[]",
        }
    ],
    # The first (and only) decision gets id 1.
    "accepted_event": [{"event_id": "evt-1", "decision_id": 1, "received_at": AT}],
    "job_state": [{"job": "pulse", "last_slot": AT, "last_started_at": AT, "last_finished_at": AT}],
    # A day whose decisions the archivist has moved out (ARCHIVED_THROUGH), and the day after it, whose entries are
    # kept.
    "scorecard_day": [
        {"window_seconds": 86400, "day": "2026-10-30", "key": "rule:coder:confirmed", "count": 2},
        {"window_seconds": 86400, "day": "2026-10-31", "key": "rule:coder:confirmed", "count": 3},
        {"window_seconds": 86400, "day": "2026-10-31", "key": "day:counted", "count": 3},
    ],
    # Schema version 8: one mark per window length (its key), through the last day counted; bumped on every change.
    "scorecard_mark": [{"window_seconds": 86400, "through": "2026-11-01", "version": 4}],
    # Schema version 12: the archivist moved out decisions up to the last hour of ARCHIVED_THROUGH.
    "archived_count": [
        {"kind": "decisions", "hour": "2026-10-29 09", "count": 1},
        {"kind": "decisions", "hour": f"{ARCHIVED_THROUGH} 23", "count": 2},
    ],
    # Schema version 13: the kept days summed by week (the Monday that starts it): both days are in the week of
    # Monday 2026-10-26.
    "scorecard_week": [
        {"window_seconds": 86400, "week": "2026-10-26", "key": "rule:coder:confirmed", "count": 5},
        {"window_seconds": 86400, "week": "2026-10-26", "key": "day:counted", "count": 3},
    ],
    # One entry per decision (its key is the decision's id).
    "scorecard_entry": [
        {
            "decision_id": 1,
            "subject_id": "PORT-2",
            "role": "coder",
            "outcome": "would_dispatch",
            "failed_gates": "",
            "evaluated_at": AT,
            "taken_up_at": AT,
        }
    ],
    # Schema version 5: the sender's names are short (a made-up "accepted_delivery-1" would not fit).
    "accepted_delivery": [
        {"sender": "github", "delivery": "guid-1", "decision_id": 1, "received_at": AT},
        {"sender": "gitlab", "delivery": "key-1", "decision_id": None, "received_at": AT},
    ],
    "reconciliation_gap": [
        {
            "sender": "github",
            "hook": "repos/acme/site/hooks/1",
            "delivery": "101",
            "guid": "guid-2",
            "event": "pull_request",
            "found_at": AT,
            "updated_at": AT,
            "state": "redelivered",
            "attempts": 1,
            "detail": "",
        }
    ],
    # Schema version 6: a version is twelve hex digits, and each version follows another (`replaces`, unique).
    "router_policy_version": [
        {
            "version": "0123456789ab",
            "document": '{"allowlist":[],"fleet_size":1,"retry_budget":2,"rules":[]}',
            "set_by": "svc",
            "set_at": AT,
            "reason": "the first policy",
            "forced": None,
            "replaces": 0,
        },
        {
            "version": "ba9876543210",
            "document": '{"allowlist":["github:ada"],"fleet_size":1,"retry_budget":2,"rules":[]}',
            "set_by": "ada",
            "set_at": AT,
            "reason": "let Ada through",
            "forced": "no evidence yet",
            "replaces": 1,
        },
    ],
    # Schema version 7: one job per decision (the key is unique), so one row for the one decision: PORT-2's, running
    # (migration 10 gives the ticket its job and takes it off "needs you": the job is what it waits on now).
    "dispatch_job": [
        {
            "decision_id": 1,
            "event_id": "evt-1",
            "ticket": "PORT-2",
            "role": "coder",
            "rule": "coder",
            "state": "running",
            "bay": "bay-1",
            "worker": "bay-1",
            "attempts": 0,
            "created_at": AT,
            "claimed_at": AT,
            "heartbeat_at": AT,
            "leased_until": AT,
            "finished_at": None,
            "result": None,
            # Schema version 10: a running job has written nothing to the forge yet and has no failure.
            "forge_state": "none",
            # Schema version 11: the principal of the worker that claimed it.
            "worker_principal": "b" * 32,
        }
    ],
    # Schema version 10: a ticket has one pull request (its key); PORT-2's job is still running, so this one is the
    # team's, found by its branch (no job opened it).
    "pull_request": [
        {
            "ticket_key": "PORT-2",
            "forge": "github",
            "repo": "acme/site",
            "number": 7,
            "url": "https://github.com/acme/site/pull/7",
            "branch": "PORT-2-printer",
            "state": "open",
            "head_sha": "a" * 40,
            "merge_commit_sha": None,
            "job_id": None,
            "green_at": AT,
            "updated_at": AT,
        }
    ],
}
# The stage counts a database gets from its tickets (migration 2 fills them from the tickets of a version 1 one).
STAGE_COUNTS = {"queued": 2, "execute": 1, "human_test": 1}
ROWS["stage_count"] = [{"stage": stage, "tickets": n} for stage, n in sorted(STAGE_COUNTS.items())]


def build_at(version: int, database: Database) -> None:
    """A database as a release at schema `version` left it: its frozen DDL, its `schema_version` rows, rows."""
    with database.connection_context(), database.atomic():
        for statement in migrations.frozen_ddl(version, migrations.backend(database)):
            database.execute_sql(statement)
        for applied in range(1, version + 1):
            _insert(database, "schema_version", {"version": applied, "applied_at": AT})
        shape = live_schema(database)
        for table in _parents_first(shape):
            if table == "schema_version":
                continue
            for n, given in enumerate(ROWS.get(table) or [{}, {}], start=1):
                row = {
                    column: given[column] if column in given else _made_up(table, column, meta, n, shape)
                    for column, meta in shape[table]["columns"].items()
                }
                _insert(database, table, {k: v for k, v in row.items() if v is not _SERIAL})


def rows(database: Database) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table, as the driver reads it back, in a stable order."""
    with database.connection_context():
        found = {}
        for table in database.get_tables():
            cursor = database.execute_sql(f'SELECT * FROM "{table}"')  # noqa: S608 (a table name of our own)
            names = [d[0] for d in cursor.description]
            found[table] = sorted((dict(zip(names, r, strict=True)) for r in cursor.fetchall()), key=repr)
        return found


_SERIAL = object()


def _made_up(table: str, column: str, meta: dict, n: int, shape: dict) -> Any:
    for fk_column, dest_table, dest_column, _ in shape[table]["foreign_keys"]:
        if fk_column == column:  # the parent's first row
            first = (ROWS.get(dest_table) or [{}])[0]
            if dest_column in first:
                return first[dest_column]
            return 1 if shape[dest_table]["columns"][dest_column]["serial"] else f"{dest_table}-1"
    if meta["serial"]:
        return _SERIAL  # the database numbers it (and a PostgreSQL sequence must stay ahead of the rows)
    if meta["null"] and not meta["pk"]:
        return None
    kind = meta["type"]
    if "char" in kind or "text" in kind:
        return f"{table}-{n}"
    if "bool" in kind:
        return n % 2 == 0
    if "int" in kind:
        return n
    if any(word in kind for word in ("real", "double", "float", "numeric")):
        return n + 0.5
    if "time" in kind or "date" in kind:
        return AT
    raise AssertionError(f"no made-up value for {table}.{column} of type {kind}")


def _insert(database: Database, table: str, row: dict[str, Any]) -> None:
    names = ", ".join(f'"{k}"' for k in row)
    marks = ", ".join([database.param] * len(row))
    database.execute_sql(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', list(row.values()))  # noqa: S608


def _parents_first(shape: dict) -> list[str]:
    ordered: list[str] = []

    def visit(table: str, seen: tuple[str, ...] = ()) -> None:
        if table in ordered or table in seen:
            return
        for _, dest, _, _ in shape[table]["foreign_keys"]:
            if dest != table:
                visit(dest, (*seen, table))
        ordered.append(table)

    for table in sorted(shape):
        visit(table)
    return ordered
