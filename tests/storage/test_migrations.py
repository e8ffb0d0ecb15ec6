"""Upgrades: a database of every released schema version, with rows, ends up exactly as the models declare and
keeps its rows; so does a fresh one. A model changed without its migration fails here."""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime

import pytest
from peewee import CharField, TextField
from playhouse.migrate import migrate as run_operations

from storage import db as storage_db
from storage import migrations
from storage.models import SchemaVersion

from conftest import BACKEND
from processes import SVC, ServiceProcess, free_port, svc_env
from schema_kit import (
    ARCHIVED_THROUGH,
    STAGE_COUNTS,
    ScratchDatabases,
    build_at,
    declared_schema,
    differences,
    live_schema,
    rows,
)

pytestmark = pytest.mark.both_backends

LATEST = migrations.MIGRATIONS[-1][0]
FROZEN = migrations.frozen_versions()


@pytest.fixture(scope="module")
def declared(tmp_path_factory):
    """What the models declare, made real on the test backend and read back: once for the module, since it depends
    on the models alone (on PostgreSQL each making is a database created, filled with the DDL and dropped)."""
    made = ScratchDatabases(tmp_path_factory.mktemp("declared"), BACKEND)
    try:
        yield declared_schema(made)
    finally:
        made.close()


def bind(url: str) -> None:
    storage_db.bind(storage_db.open_database(url, max_connections=4))


def at_latest(url: str, database) -> None:
    """A database with rows at the newest schema: built at the newest frozen version, then migrated (bound)."""
    build_at(FROZEN[-1], database)
    bind(url)
    migrations.migrate()
    assert migrations.current_version() == LATEST


def test_versions_are_numbered_in_order_and_frozen_for_both_backends():
    versions = [version for version, _, _ in migrations.MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1))
    assert list(range(1, len(FROZEN) + 1)) == FROZEN
    assert FROZEN[-1] <= LATEST
    for version in FROZEN:
        for backend in ("sqlite", "postgresql"):
            statements = migrations.frozen_ddl(version, backend)
            assert statements and all(s.startswith("CREATE ") for s in statements), (version, backend)


def test_the_newest_frozen_version_is_what_the_models_declare_when_it_is_the_current_one():
    # A released version's models, frozen: if the newest migration is frozen, its files must be the models' DDL.
    from peewee import PostgresqlDatabase, SqliteDatabase

    if FROZEN[-1] != LATEST:
        pytest.skip(f"version {LATEST} is not released (frozen) yet; the upgrade tests below cover it")
    for backend, database in (("sqlite", SqliteDatabase(None)), ("postgresql", PostgresqlDatabase(None))):
        assert migrations.frozen_ddl(LATEST, backend) == migrations.declared_ddl(database), backend


def test_a_fresh_database_gets_exactly_what_the_models_declare(scratch, declared):
    url = scratch.url()
    bind(url)
    assert migrations.migrate() == list(range(1, LATEST + 1))
    assert migrations.migrate() == []
    assert differences(declared, live_schema(scratch.connect(url))) == []
    assert migrations.current_version() == LATEST


def changed_on_purpose(table: str, kept: list[dict], version: int) -> list[dict] | None:
    """What upgrading a database at `version` makes of `kept`, its rows of `table` (schema_kit.ROWS), when a
    migration changes them on purpose; None when none does (every row stays as it was)."""
    if table == "ticket" and 7 <= version < 10:
        # 10: a ticket whose job is queued or running (PORT-2's: jobs came with version 7) waits on that job, not on
        # you.
        return [{**row, "needs_you": False} if row["key"] == "PORT-2" else row for row in kept]
    if table == "scorecard_day" and version < 13:
        # 8: the days a read used to write (empty ones too) go; the jobs process counts the settled ones again.
        if version < 8:
            return []
        # 13: the days after the archived decisions go (they have no rule version counts; the jobs process counts
        # them again from their entries, which stay); the archived days stay, since their entries are gone. Before
        # version 12 nothing was archived (no counts of it), so every day goes.
        return [row for row in kept if version >= 12 and row["day"] <= ARCHIVED_THROUGH]
    if table == "scorecard_mark" and version < 13:
        # 13: the mark moves back before the days that went, so that the jobs process counts them again, and its
        # version goes up, so that a count made before the upgrade is not kept.
        return [
            {
                **row,
                "through": min(row["through"], ARCHIVED_THROUGH) if version >= 12 else None,
                "version": row["version"] + 1,
            }
            for row in kept
        ]
    return None


@pytest.mark.parametrize("version", FROZEN)
def test_a_database_at_each_released_version_upgrades_to_the_models_and_keeps_its_rows(scratch, declared, version):
    url = scratch.url()
    database = scratch.connect(url)
    build_at(version, database)
    before = rows(database)
    assert [table for table, table_rows in before.items() if not table_rows] == []
    bind(url)
    assert migrations.migrate() == list(range(version + 1, LATEST + 1))
    assert migrations.migrate() == []

    assert differences(declared, live_schema(database)) == []
    after = rows(database)
    for table, kept in before.items():
        if table == "schema_version":
            continue
        columns = set(kept[0]) if kept else set()
        # A column a later migration renamed keeps its values under its new name (a database at that migration's
        # version or later has the new name already).
        renamed = {
            new: old for (where, old), new in migrations.RENAMED_COLUMNS.items() if where == table and old in columns
        }
        upgraded = [{renamed.get(k, k): v for k, v in row.items()} for row in after[table]]
        expected = changed_on_purpose(table, kept, version)
        assert [{k: v for k, v in row.items() if k in columns} for row in upgraded] == (
            kept if expected is None else expected
        ), table
    if version < 10:
        # 10: each ticket gets its queued or running job (PORT-2's, if the database was at a version with jobs).
        job = (1, "running") if version >= 7 else (None, None)
        assert [
            (row["key"], row["job_id"], row["job_state"]) for row in sorted(after["ticket"], key=lambda r: r["key"])
        ] == [
            ("PORT-1", None, None),
            ("PORT-2", *job),
            ("PORT-3", None, None),
            ("PORT-4", None, None),
        ]
    if 3 <= version < 11:
        # 11: each account gets a principal of its own, and a worker its bay: its name.
        accounts = sorted(after["account"], key=lambda r: r["name"])
        assert [(row["name"], row["bay"]) for row in accounts] == [("ada", None), ("bay-1", "bay-1")]
        principals = {row["principal"] for row in accounts}
        assert len(principals) == 2 and all(re.fullmatch(r"[0-9a-f]{32}", p) for p in principals), principals
    if version == 12:
        # 13: the archived days it kept are summed by their week (the Monday that starts it).
        assert [(row["week"], row["key"], row["count"]) for row in after["scorecard_week"]] == [
            ("2026-10-26", "rule:coder:confirmed", 2)
        ]
    assert [row["version"] for row in sorted(after["schema_version"], key=lambda r: r["version"])] == list(
        range(1, LATEST + 1)
    )
    # Version 1 had no stage counts: migration 2 counts the tickets that are there.
    assert {row["stage"]: row["tickets"] for row in after["stage_count"]} == STAGE_COUNTS


def test_the_scorecards_weeks_keep_the_archived_days_counts_and_count_the_rest_again(scratch):
    """Migration 13: the kept days whose decisions were archived (their entries gone) stay and are summed by week;
    the later ones go, and the mark moves back before them, to be counted again with their rule versions."""
    url = scratch.url()
    bind(url)
    before_weeks = [m for m in migrations.MIGRATIONS if m[0] < 13]
    assert migrations.migrate(before_weeks)[-1] == 12
    database = storage_db.db.obj
    p = database.param
    with storage_db.connection():
        database.execute_sql(
            f'INSERT INTO "archived_count" ("kind", "hour", "count") VALUES ({p}, {p}, {p})',  # noqa: S608
            ["decisions", "2026-03-04T23", 5],
        )
        for day, count in (("2026-03-02", 2), ("2026-03-04", 3), ("2026-03-05", 7)):  # a Monday, a Wednesday, then
            database.execute_sql(
                f'INSERT INTO "scorecard_day" ("window_seconds", "day", "key", "count") VALUES ({p}, {p}, {p}, {p})',  # noqa: S608
                [86400, day, "rule:coder:confirmed", count],
            )
        database.execute_sql(
            f'INSERT INTO "scorecard_mark" ("window_seconds", "through", "version") VALUES ({p}, {p}, {p})',  # noqa: S608
            [86400, "2026-03-20", 4],
        )
    assert migrations.migrate() == [13]
    with storage_db.connection():
        days = database.execute_sql('SELECT "day", "count" FROM "scorecard_day" ORDER BY "day"').fetchall()
        weeks = database.execute_sql('SELECT "week", "key", "count" FROM "scorecard_week"').fetchall()
        mark = database.execute_sql('SELECT "through", "version" FROM "scorecard_mark"').fetchall()
    assert [tuple(row) for row in days] == [("2026-03-02", 2), ("2026-03-04", 3)]
    assert [tuple(row) for row in weeks] == [("2026-03-02", "rule:coder:confirmed", 5)]
    assert [tuple(row) for row in mark] == [("2026-03-04", 5)]


def test_a_forgotten_migration_is_found(scratch, declared):
    # A model that gained a column nobody migrated: the comparison names it.
    url = scratch.url()
    bind(url)
    migrations.migrate()
    database = scratch.connect(url)
    with database.connection_context():
        database.execute_sql('ALTER TABLE "ticket" DROP COLUMN "link"')
    found = differences(declared, live_schema(database))
    assert len(found) == 1 and found[0].startswith("ticket.link: declared {'type': 'text'") and "found None" in found[0]


def _rebuild_ticket(migrator):
    # On SQLite, changing a column's type rebuilds the table (copy, drop, rename): with foreign keys on, dropping
    # `ticket` would cascade-delete its timeline entries, slot claims and pull requests.
    run_operations(
        migrator.add_column("ticket", "owner", CharField(max_length=64, null=True)),
        migrator.alter_column_type("ticket", "title", TextField()),
    )


def test_a_migration_that_rebuilds_a_table_keeps_the_rows_that_refer_to_it(scratch):
    url = scratch.url()
    database = scratch.connect(url)
    at_latest(url, database)
    before = rows(database)
    assert migrations.migrate([*migrations.MIGRATIONS, (LATEST + 1, "rebuild", _rebuild_ticket)]) == [LATEST + 1]
    after = rows(database)
    referring = sorted(
        table
        for table, shape in live_schema(database).items()
        if any(fk[1] == "ticket" for fk in shape["foreign_keys"])
    )
    assert {"pull_request", "slot_claim", "timeline_entry"} <= set(referring)  # read from the schema: these at least
    for table in referring:
        assert after[table] == before[table] != [], table
    assert [row["title"] for row in after["ticket"]] == [row["title"] for row in before["ticket"]]
    columns = live_schema(database)["ticket"]["columns"]
    assert columns["title"]["type"] == "text" and "owner" in columns
    assert ("initiative_id", "initiative", "id", "RESTRICT") in live_schema(database)["ticket"]["foreign_keys"]


def _orphan_a_claim(migrator):
    migrator.database.execute_sql('UPDATE "slot_claim" SET "ticket_key" = \'GONE-1\'')


def test_a_migration_that_breaks_a_reference_is_rolled_back_whole(scratch):
    url = scratch.url()
    database = scratch.connect(url)
    at_latest(url, database)
    before = rows(database)
    with pytest.raises(Exception, match=r"(?i)foreign key|dangling"):
        migrations.migrate([*migrations.MIGRATIONS, (LATEST + 1, "orphan", _orphan_a_claim)])
    assert rows(database) == before
    assert migrations.current_version() == LATEST


# -- real processes -----------------------------------------------------------------------------------------


def _svc(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([SVC, *args], env=env, capture_output=True, text=True, timeout=120)


def _svc_migrate_here(env: dict[str, str], monkeypatch, capsys) -> tuple[int, str]:
    """`svc migrate` in this process (`svc.cli.main`) with `env`: (exit code, standard output). The command itself
    runs as a real process in the two tests below; here what matters is what it does to each release's database."""
    from svc.cli import main

    with monkeypatch.context() as patched:
        for name, value in env.items():
            patched.setenv(name, value)
        try:
            code = main(["migrate"])
        finally:
            if storage_db.db.obj is not None:
                storage_db.db.close_all() if hasattr(storage_db.db.obj, "close_all") else storage_db.db.close()
    return code, capsys.readouterr().out


@pytest.mark.process
@pytest.mark.parametrize("version", FROZEN)
def test_a_database_of_each_release_migrates_twice_then_serves(scratch, tmp_path, version, monkeypatch, capsys):
    import requests

    from conftest import BASIC

    url = scratch.url()
    build_at(version, scratch.connect(url))
    env = {"DATABASE_URL": url, "SVC_DATA_DIR": str(tmp_path / "data"), "SVC_BASIC_AUTH": BASIC}
    # Migrated twice by `svc migrate` in this process (a process start each cost more than the migration), then
    # served by a real `svc serve`, which checks the schema it finds at start.
    first, said = _svc_migrate_here(env, monkeypatch, capsys)
    assert first == 0
    pending = list(range(version + 1, LATEST + 1))
    assert f"schema at version {LATEST}; applied now: {pending or 'nothing'}" in said
    second, said = _svc_migrate_here(env, monkeypatch, capsys)
    assert second == 0 and f"schema at version {LATEST}; applied now: nothing" in said
    env = svc_env(**env)

    port = free_port()
    server = ServiceProcess(["serve"], {**env, "SVC_PORT": str(port)}, tmp_path / "serve.log").start()
    base = f"http://127.0.0.1:{port}"
    auth = tuple(BASIC.split(":", 1))
    try:
        server.wait_healthy(base)
        ticket = requests.get(f"{base}/api/v1/tickets/PORT-2", auth=auth, timeout=10)
        assert ticket.status_code == 200 and ticket.json()["title"] == "Port the printer"
        snapshot = requests.get(f"{base}/api/v1/ops/snapshot", auth=auth, timeout=10).json()
        assert {k: v for k, v in snapshot["counts"]["by_stage"].items() if v} == STAGE_COUNTS
        decisions = requests.get(f"{base}/api/v1/router/decisions", auth=auth, timeout=10).json()["decisions"]
        assert [d["event_id"] for d in decisions] == ["evt-1"]
        made = requests.post(
            f"{base}/api/v1/tickets",
            json={"key": "PORT-5", "initiative_id": "port", "title": "After the upgrade"},
            auth=auth,
            timeout=10,
        )
        assert made.status_code == 201, made.text
        assert requests.get(f"{base}/api/v1/tickets/PORT-5", auth=auth, timeout=10).status_code == 200
    finally:
        server.stop()


@pytest.mark.process
def test_two_processes_migrating_a_fresh_database_at_once_apply_each_version_once(scratch, tmp_path):
    url = scratch.url()
    env = svc_env(DATABASE_URL=url, SVC_DATA_DIR=str(tmp_path / "data"))
    both = [subprocess.Popen([SVC, "migrate"], env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [proc.communicate(timeout=120)[0] for proc in both]
    assert [proc.returncode for proc in both] == [0, 0], outputs
    said = sorted(line.rsplit("applied now: ", 1)[-1].strip() for line in outputs)
    assert said == [str(list(range(1, LATEST + 1))), "nothing"]
    database = scratch.connect(url)
    assert sorted(row["version"] for row in rows(database)["schema_version"]) == list(range(1, LATEST + 1))


@pytest.mark.process
def test_a_database_a_newer_release_upgraded_is_refused_and_left_as_it_is(scratch, tmp_path):
    # Rolled back after an upgrade: the older release must not serve (or write) a schema it does not know.
    url = scratch.url()
    bind(url)
    migrations.migrate()
    with storage_db.connection():
        SchemaVersion.create(version=LATEST + 1, applied_at=datetime.now(UTC))  # what the newer release recorded
    storage_db.db.close_all() if hasattr(storage_db.db.obj, "close_all") else storage_db.db.close()
    database = scratch.connect(url)
    before = rows(database)
    env = svc_env(DATABASE_URL=url, SVC_DATA_DIR=str(tmp_path / "data"))
    for command in (["migrate"], ["serve", "--port", str(free_port())]):
        refused = _svc(command, env)
        assert refused.returncode == 2, (command, refused.stdout, refused.stderr)
        assert f"schema version {LATEST + 1}, newer than this release knows ({LATEST})" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert rows(database) == before
