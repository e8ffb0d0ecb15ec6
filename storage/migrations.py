"""Schema migrations: run on every start (and by `svc migrate`), under a lock, safe to run twice or by two
processes at once.

How a database gets its schema
- Each migration is a numbered function, recorded in `schema_version` once applied. A fresh database runs them
  all, in order: it takes exactly the path an old database takes, so the two cannot end up different.
- Migration 1 runs the frozen DDL of schema version 1 (`storage/frozen/v1.<backend>.sql`), never today's models:
  the first model change after a release would otherwise make a fresh database differ from an old one.
- Every later change is a migration made with `playhouse.migrate` (peewee's schema migrator) or, for a new table,
  with a copy of the table's model declared inside the migration as it is at that version.
- The runner holds a lock for the whole run: one transaction that starts with `BEGIN IMMEDIATE` on SQLite or takes
  an advisory lock on PostgreSQL, so a second process waits and then finds nothing left to do. On SQLite, foreign
  keys are off for the run (peewee's `migration_context`: a table rebuild must not cascade-delete the rows that
  refer to it) and `PRAGMA foreign_key_check` must come back empty before it commits. Any error rolls all of it back.
- The DDL of every released schema version is frozen in `storage/frozen/` (`scripts/freeze_schema.py`), and the
  tests build a database at each of them, with rows, upgrade it and compare it with what the models declare.

Adding a migration (a column, an index, a table)
1. Change the model in `storage/models.py` (a new table also goes into `ALL_MODELS`).
2. Append `(N, "what it is for", function)` to `MIGRATIONS`. The function takes the migrator::

       def _ticket_owner(migrator: SchemaMigrator) -> None:
           migrate(
               migrator.add_column("ticket", "owner", CharField(max_length=64, null=True)),
               migrator.add_index("ticket", ("owner",), False),
           )

       def _accounts(migrator: SchemaMigrator) -> None:
           class Account(Model):  # the table as this version makes it; later changes are later migrations
               name = CharField(primary_key=True, max_length=64)
               created_at = UTCDateTimeField()

               class Meta:
                   database = migrator.database
                   table_name = "account"

           Account.create_table(safe=False)

   Never call today's models (or `storage.*` queries built on them) from a migration: they describe the newest
   schema, not the one the migration runs on. Fill new columns or tables with SQL or with the migration's own copy.
3. `tests/storage/test_migrations.py` then checks, on SQLite and PostgreSQL, that a fresh database and one at every
   frozen version (with rows) both end up exactly as the models declare: a model changed without its migration, or a
   migration that does not match its model, fails there.
4. When the version is released, freeze it: `python scripts/freeze_schema.py` writes `storage/frozen/v<N>.*.sql`.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from importlib import resources

from peewee import (
    BigAutoField,
    BigIntegerField,
    BooleanField,
    CharField,
    CompositeKey,
    Database,
    DoubleField,
    ForeignKeyField,
    IntegerField,
    Model,
    PostgresqlDatabase,
    TextField,
    sort_models,
)
from playhouse.migrate import SchemaMigrator
from playhouse.migrate import migrate as apply_operations

from storage import models
from storage.db import connection, db, is_postgres

# pg_advisory_xact_lock key: any constant that no other application on the database uses.
_PG_LOCK_KEY = 0x5C5D_0001

Migration = Callable[[SchemaMigrator], None]


class MigrationError(RuntimeError):
    """A migration left the database inconsistent (e.g. a dangling foreign key); nothing of the run was kept."""


def backend(database: Database) -> str:
    """`postgresql` or `sqlite`: the suffix of the frozen DDL files for `database`."""
    return "postgresql" if isinstance(database, PostgresqlDatabase) else "sqlite"


def frozen_versions() -> list[int]:
    """The schema versions whose DDL is frozen in the package, ascending."""
    found = {
        int(entry.name.split(".", 1)[0].removeprefix("v"))
        for entry in resources.files("storage").joinpath("frozen").iterdir()
        if entry.name.startswith("v") and entry.name.endswith(".sql")
    }
    return sorted(found)


def frozen_ddl(version: int, backend_name: str) -> list[str]:
    """The statements of the frozen DDL of schema `version` for `backend_name` (`sqlite` or `postgresql`)."""
    text = resources.files("storage").joinpath("frozen", f"v{version}.{backend_name}.sql").read_text("utf-8")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    return [statement.strip() for statement in re.split(r";\s*$", body, flags=re.MULTILINE) if statement.strip()]


def declared_ddl(database: Database, tables: Sequence[type[Model]] = models.ALL_MODELS) -> list[str]:
    """The DDL the models declare for `database`'s backend: what `create_tables` would run (nothing is run)."""
    statements: list[str] = []
    with database.bind_ctx(tables, bind_refs=False, bind_backrefs=False):
        for model in sort_models(tables):
            for node in (model._schema._create_table(safe=True), *model._schema._create_indexes(safe=True)):
                sql, params = node.query()
                if params:  # DDL with bound values could not be frozen as text
                    raise ValueError(f"{model.__name__}: DDL with parameters {params!r}")
                statements.append(sql)
    return statements


def _initial_schema(migrator: SchemaMigrator) -> None:
    for statement in frozen_ddl(1, backend(migrator.database)):
        migrator.database.execute_sql(statement)

    class Wallet(Model):  # the wallet's one row, in the columns of version 1
        id = IntegerField(primary_key=True)
        budget = DoubleField()
        spent = DoubleField()
        locked = BooleanField()
        updated_at = models.UTCDateTimeField()

        class Meta:
            database = migrator.database
            table_name = "wallet"

    now = datetime.now(UTC)
    Wallet.insert(id=1, budget=0.0, spent=0.0, locked=False, updated_at=now).on_conflict_ignore().execute()


def _stage_counts(migrator: SchemaMigrator) -> None:
    class StageCount(Model):
        stage = CharField(primary_key=True, max_length=16)
        tickets = IntegerField()

        class Meta:
            database = migrator.database
            table_name = "stage_count"

    StageCount.create_table(safe=False)
    migrator.database.execute_sql(
        'INSERT INTO "stage_count" ("stage", "tickets") SELECT "stage", COUNT(*) FROM "ticket" GROUP BY "stage"'
    )


def _accounts_and_attribution(migrator: SchemaMigrator) -> None:
    """People's accounts, and who last changed each initiative and the wallet."""

    class Account(Model):  # the table as version 3 makes it
        name = CharField(primary_key=True, max_length=64)
        role = CharField(max_length=16)
        password_hash = TextField()
        created_at = models.UTCDateTimeField()
        password_changed_at = models.UTCDateTimeField()

        class Meta:
            database = migrator.database
            table_name = "account"

    Account.create_table(safe=False)
    apply_operations(
        migrator.add_column("initiative", "updated_by", CharField(max_length=128, null=True)),
        migrator.add_column("wallet", "updated_by", CharField(max_length=128, null=True)),
    )


def _decision_evidence(migrator: SchemaMigrator) -> None:
    """What each decision's gates read and applied, and the scorecard kept as decisions and signals arrive."""

    class RouterDecision(Model):  # only what the foreign key refers to
        id = BigAutoField()

        class Meta:
            database = migrator.database
            table_name = "router_decision"

    class ScorecardEntry(Model):  # the tables as version 4 makes them
        decision = ForeignKeyField(RouterDecision, column_name="decision_id", primary_key=True, on_delete="CASCADE")
        subject_id = CharField(max_length=128)
        role = CharField(max_length=16)
        outcome = CharField(max_length=16)
        failed_gates = CharField(max_length=128)
        evaluated_at = models.UTCDateTimeField()
        taken_up_at = models.UTCDateTimeField(null=True)

        class Meta:
            database = migrator.database
            table_name = "scorecard_entry"
            legacy_table_names = False  # index names as the models make them
            indexes = (
                (("subject_id", "role", "taken_up_at"), False),
                (("evaluated_at",), False),
            )

    class ScorecardDay(Model):
        window_seconds = IntegerField()
        day = CharField(max_length=10)
        key = CharField(max_length=48)
        count = IntegerField()

        class Meta:
            database = migrator.database
            table_name = "scorecard_day"
            legacy_table_names = False
            primary_key = CompositeKey("window_seconds", "day", "key")

    apply_operations(
        migrator.add_column("router_decision", "policy", TextField(null=True)),
        migrator.add_column("router_decision", "facts", TextField(null=True)),
    )
    ScorecardEntry.create_table(safe=False)
    ScorecardDay.create_table(safe=False)


def _reconciliation(migrator: SchemaMigrator) -> None:
    """The delivery ids the service accepted, and the reconciliation ledger."""

    class RouterDecision(Model):  # only what the foreign key refers to
        id = BigAutoField()

        class Meta:
            database = migrator.database
            table_name = "router_decision"

    class AcceptedDelivery(Model):  # the tables as version 5 makes them
        sender = CharField(max_length=16)
        delivery = CharField(max_length=200)
        decision = ForeignKeyField(RouterDecision, column_name="decision_id", null=True, on_delete="CASCADE")
        received_at = models.UTCDateTimeField()

        class Meta:
            database = migrator.database
            table_name = "accepted_delivery"
            legacy_table_names = False
            primary_key = CompositeKey("sender", "delivery")
            indexes = ((("received_at",), False),)

    class ReconciliationGap(Model):
        id = BigAutoField()
        sender = CharField(max_length=16)
        hook = CharField(max_length=200)
        delivery = CharField(max_length=64, null=True)
        guid = CharField(max_length=200, null=True)
        event = CharField(max_length=64, null=True)
        found_at = models.UTCDateTimeField()
        updated_at = models.UTCDateTimeField()
        state = CharField(max_length=16)
        attempts = IntegerField(default=0)
        detail = TextField(default="")

        class Meta:
            database = migrator.database
            table_name = "reconciliation_gap"
            legacy_table_names = False
            indexes = (
                (("sender", "hook", "guid"), True),
                (("sender", "guid"), False),
                (("state", "updated_at"), False),
            )

    AcceptedDelivery.create_table(safe=False)
    ReconciliationGap.create_table(safe=False)


def _policy_as_data(migrator: SchemaMigrator) -> None:
    """The router's policy versions; each decision's rule; the rule and its version on each scorecard entry."""

    class RouterPolicyVersion(Model):  # the table as version 6 makes it
        id = BigAutoField()
        version = CharField(max_length=12)
        document = TextField()
        set_by = CharField(max_length=128, null=True)
        set_at = models.UTCDateTimeField()
        reason = TextField()
        forced = TextField(null=True)
        replaces = BigIntegerField(unique=True)

        class Meta:
            database = migrator.database
            table_name = "router_policy_version"
            legacy_table_names = False

    RouterPolicyVersion.create_table(safe=False)
    apply_operations(
        migrator.add_column("router_decision", "rule", CharField(max_length=64, null=True)),
        migrator.add_column("scorecard_entry", "rule", CharField(max_length=64, null=True)),
        migrator.add_column("scorecard_entry", "rule_version", CharField(max_length=12, null=True)),
        migrator.add_index("scorecard_entry", ("rule_version", "evaluated_at"), False),
    )


def _dispatch_jobs(migrator: SchemaMigrator) -> None:
    """Live dispatch: the jobs live rules queue for workers in bays; whether each decision queued one."""

    class RouterDecision(Model):  # only what the foreign key refers to
        id = BigAutoField()

        class Meta:
            database = migrator.database
            table_name = "router_decision"

    class DispatchJob(Model):  # the table as version 7 makes it
        id = BigAutoField()
        decision = ForeignKeyField(RouterDecision, column_name="decision_id", unique=True, on_delete="CASCADE")
        event_id = CharField(max_length=200, null=True)
        ticket = CharField(max_length=64)
        role = CharField(max_length=16)
        rule = CharField(max_length=64, null=True)
        state = CharField(max_length=16)
        bay = CharField(max_length=64, null=True)
        worker = CharField(max_length=64, null=True)
        attempts = IntegerField(default=0)
        created_at = models.UTCDateTimeField()
        claimed_at = models.UTCDateTimeField(null=True)
        heartbeat_at = models.UTCDateTimeField(null=True)
        leased_until = models.UTCDateTimeField(null=True)
        finished_at = models.UTCDateTimeField(null=True)
        result = TextField(null=True)
        forge_pull_request = TextField(null=True)
        forge_comment = TextField(null=True)
        forge_error = TextField(null=True)
        cancel_reason = TextField(null=True)

        class Meta:
            database = migrator.database
            table_name = "dispatch_job"
            legacy_table_names = False
            indexes = (
                (("state", "id"), False),
                (("state", "leased_until"), False),
                (("ticket", "id"), False),
                (("worker", "id"), False),
            )

    apply_operations(
        migrator.add_column("router_decision", "dispatched", BooleanField(default=False)),
        migrator.add_column("router_decision", "job_id", BigIntegerField(null=True)),
    )
    DispatchJob.create_table(safe=False)


def _scorecard_mark(migrator: SchemaMigrator) -> None:
    """The scorecard's kept days are counted by the jobs process up to a mark, and only days with entries keep a
    row: the rows a read used to write (one per day of its range, empty days too) go; the jobs process counts
    again what is settled."""

    class ScorecardMark(Model):  # the table as version 8 makes it
        window_seconds = IntegerField(primary_key=True)
        through = CharField(max_length=10, null=True)
        version = IntegerField(default=1)

        class Meta:
            database = migrator.database
            table_name = "scorecard_mark"
            legacy_table_names = False

    ScorecardMark.create_table(safe=False)
    migrator.database.execute_sql('DELETE FROM "scorecard_day"')


def _live_since(migrator: SchemaMigrator) -> None:
    """Each policy version keeps since which version its live rules have been live. The versions already stored get
    theirs at the next start (`domain/router/policy_versions.seed`): working it out reads each rule's version, which
    only the domain computes."""
    apply_operations(migrator.add_column("router_policy_version", "live_since", TextField(null=True)))


def _the_loop(migrator: SchemaMigrator) -> None:
    """The loop: a job's failure and forge write said once (the reason column, which held every kind, renamed), its
    retries and a fixer's head; a ticket's job; a decision held while paused; each ticket's pull request."""

    class Ticket(Model):  # only what the foreign key refers to
        key = CharField(primary_key=True, max_length=64)

        class Meta:
            database = migrator.database
            table_name = "ticket"

    class PullRequest(Model):  # the table as version 10 makes it
        ticket = ForeignKeyField(Ticket, column_name="ticket_key", primary_key=True, on_delete="CASCADE")
        forge = CharField(max_length=16)
        repo = CharField(max_length=200, null=True)
        number = IntegerField(null=True)
        url = TextField(null=True)
        branch = CharField(max_length=255, null=True)
        state = CharField(max_length=16)
        head_sha = CharField(max_length=64, null=True)
        merge_commit_sha = CharField(max_length=64, null=True)
        job_id = BigIntegerField(null=True)
        green_at = models.UTCDateTimeField(null=True)
        updated_at = models.UTCDateTimeField()

        class Meta:
            database = migrator.database
            table_name = "pull_request"
            legacy_table_names = False
            indexes = ((("head_sha",), False), (("merge_commit_sha",), False), (("repo", "number"), False))

    apply_operations(
        migrator.rename_column("dispatch_job", "cancel_reason", "failure_detail"),
        migrator.add_column("dispatch_job", "failure_kind", CharField(max_length=16, null=True)),
        migrator.add_column("dispatch_job", "forge_state", CharField(max_length=16, default="none")),
        migrator.add_column("dispatch_job", "retry_of", BigIntegerField(null=True)),
        migrator.add_column("dispatch_job", "head_sha", CharField(max_length=64, null=True)),
        # An operator's retry is a second job for the same decision.
        migrator.drop_index("dispatch_job", "dispatch_job_decision_id"),
        migrator.add_index("dispatch_job", ("decision_id",), False),
        migrator.add_column("ticket", "job_id", BigIntegerField(null=True)),
        migrator.add_column("ticket", "job_state", CharField(max_length=16, null=True)),
        migrator.add_column("router_decision", "held", BooleanField(default=False)),
    )
    database = migrator.database
    mark = database.param
    # What the reason of a job that ended said, as a kind; what its forge write came to.
    for kind, condition, params in (
        ("cancelled", "\"state\" = 'cancelled'", []),
        ("lease", f'"state" = \'failed\' AND "failure_detail" LIKE {mark}', ["%lease%"]),
        ("output", f'"state" = \'failed\' AND "failure_detail" LIKE {mark}', ["%output gate%"]),
        ("worker", '"state" = \'failed\' AND "failure_kind" IS NULL', []),
    ):
        database.execute_sql(f'UPDATE "dispatch_job" SET "failure_kind" = {mark} WHERE {condition}', [kind, *params])  # noqa: S608
    for state, condition in (
        ("written", '"forge_pull_request" IS NOT NULL'),
        ("failed", '"forge_pull_request" IS NULL AND "forge_error" IS NOT NULL'),
    ):
        database.execute_sql(f'UPDATE "dispatch_job" SET "forge_state" = {mark} WHERE {condition}', [state])  # noqa: S608
    database.execute_sql(
        'UPDATE "ticket" SET "job_id" = (SELECT MAX("id") FROM "dispatch_job" WHERE "dispatch_job"."ticket" = '
        '"ticket"."key" AND "dispatch_job"."state" IN (\'queued\', \'running\'))'
    )
    job_of_ticket = 'SELECT "state" FROM "dispatch_job" WHERE "dispatch_job"."id" = "ticket"."job_id"'
    database.execute_sql(
        f'UPDATE "ticket" SET "job_state" = ({job_of_ticket}), "needs_you" = {mark} WHERE "job_id" IS NOT NULL',  # noqa: S608
        [False],
    )
    PullRequest.create_table(safe=False)


# Columns a migration renamed, (table, old) -> new: what an upgraded database keeps under another name.
RENAMED_COLUMNS = {("dispatch_job", "cancel_reason"): "failure_detail"}


def _worker_boundary(migrator: SchemaMigrator) -> None:
    """A worker's bay and principal (an account added again is another principal), what it last did and was refused,
    and the principal that claimed each job."""
    apply_operations(
        migrator.add_column("account", "principal", CharField(max_length=32, null=True)),
        migrator.add_column("account", "bay", CharField(max_length=64, null=True)),
        migrator.add_column("account", "last_heard_at", models.UTCDateTimeField(null=True)),
        migrator.add_column("account", "refused_at", models.UTCDateTimeField(null=True)),
        migrator.add_column("account", "refusal", TextField(null=True)),
        migrator.add_column("dispatch_job", "worker_principal", CharField(max_length=32, null=True)),
    )
    database = migrator.database
    # Each account that exists is its own first principal; a worker's bay is its name (`svc user add`'s default).
    for (name,) in database.execute_sql('SELECT "name" FROM "account"').fetchall():
        database.execute_sql(
            'UPDATE "account" SET "principal" = %s WHERE "name" = %s'.replace("%s", database.param),
            (secrets.token_hex(16), name),
        )
    database.execute_sql('UPDATE "account" SET "bay" = "name" WHERE "role" = \'worker\'')
    apply_operations(migrator.add_not_null("account", "principal"))


def _archived_counts(migrator: SchemaMigrator) -> None:
    """How many rows of each kind the archivist moved out, per hour of their own time."""

    class ArchivedCount(Model):  # the table as version 12 makes it
        kind = CharField(max_length=32)
        hour = CharField(max_length=13)
        count = IntegerField()

        class Meta:
            database = migrator.database
            table_name = "archived_count"
            legacy_table_names = False
            primary_key = CompositeKey("kind", "hour")

    ArchivedCount.create_table(safe=False)


def _scorecard_weeks(migrator: SchemaMigrator) -> None:
    """The scorecard's kept days summed by week, and each rule version's counts beside its role's (what a rule has
    earned reads them instead of its entries). The days whose decisions the archivist moved out keep their counts
    (their entries are gone: nothing could count them again) and are summed by week here; the later ones have no
    version counts, so they go, and the mark moves back before them: the jobs process counts them again from the
    entries, which stay, adding to their weeks' sums."""

    class ScorecardWeek(Model):  # the table as version 13 makes it
        window_seconds = IntegerField()
        week = CharField(max_length=10)
        key = CharField(max_length=48)
        count = IntegerField()

        class Meta:
            database = migrator.database
            table_name = "scorecard_week"
            legacy_table_names = False
            primary_key = CompositeKey("window_seconds", "week", "key")

    ScorecardWeek.create_table(safe=False)
    database = migrator.database
    _entries_outlive_their_decisions(migrator)
    _accepted_ids_outlive_their_decisions(migrator)
    apply_operations(migrator.add_index("router_decision", ("subject_id", "evaluated_at"), False))
    (archived,) = database.execute_sql(
        'SELECT MAX("hour") FROM "archived_count" WHERE "kind" = %s'.replace("%s", database.param), ["decisions"]
    ).fetchone()
    if archived is None:
        database.execute_sql('DELETE FROM "scorecard_day"')
        database.execute_sql('UPDATE "scorecard_mark" SET "through" = NULL, "version" = "version" + 1')
        return
    first = models.stored_day(archived[:10]) + timedelta(days=1)
    first_kept = first.isoformat()
    database.execute_sql('DELETE FROM "scorecard_day" WHERE "day" >= %s'.replace("%s", database.param), [first_kept])
    last = (first - timedelta(days=1)).isoformat()
    database.execute_sql(
        'UPDATE "scorecard_mark" SET "through" = CASE WHEN "through" > %s THEN %s ELSE "through" END, '
        '"version" = "version" + 1'.replace("%s", database.param),
        [last, last],
    )
    monday = (
        """to_char(date_trunc('week', "day"::date), 'YYYY-MM-DD')"""
        if isinstance(database, PostgresqlDatabase)
        else """date("day", '-6 days', 'weekday 1')"""
    )
    database.execute_sql(
        f'INSERT INTO "scorecard_week" ("window_seconds", "week", "key", "count") '  # noqa: S608
        f'SELECT "window_seconds", {monday}, "key", SUM("count") FROM "scorecard_day" GROUP BY 1, 2, 3'
    )


def _entries_outlive_their_decisions(migrator: SchemaMigrator) -> None:
    """Part of 13: a scorecard entry no longer refers to its decision's row, so archiving the decision keeps the entry
    and the scorecard's answer over any range and window."""
    columns = [
        ("decision_id", "INTEGER NOT NULL PRIMARY KEY"),
        ("subject_id", "VARCHAR(128) NOT NULL"),
        ("role", "VARCHAR(16) NOT NULL"),
        ("outcome", "VARCHAR(16) NOT NULL"),
        ("failed_gates", "VARCHAR(128) NOT NULL"),
        ("evaluated_at", "DATETIME NOT NULL"),
        ("taken_up_at", "DATETIME"),
        ("rule", "VARCHAR(64)"),
        ("rule_version", "VARCHAR(12)"),
    ]
    indexes = [("subject_id", "role", "taken_up_at"), ("evaluated_at",), ("rule_version", "evaluated_at")]
    _without_reference_to_decisions(migrator, "scorecard_entry", columns, indexes)


def _accepted_ids_outlive_their_decisions(migrator: SchemaMigrator) -> None:
    """Part of 13: an accepted event id no longer refers to its decision's row, so the same event delivered again
    after the archivist moved its decision out is still a duplicate."""
    columns = [
        ("event_id", "VARCHAR(200) NOT NULL PRIMARY KEY"),
        ("decision_id", "INTEGER NOT NULL"),
        ("received_at", "DATETIME NOT NULL"),
    ]
    _without_reference_to_decisions(migrator, "accepted_event", columns, [("decision_id",)])


def _without_reference_to_decisions(
    migrator: SchemaMigrator, table: str, columns: list[tuple[str, str]], indexes: list[tuple[str, ...]]
) -> None:
    """`table`'s `decision_id` without its foreign key to `router_decision`. PostgreSQL drops the constraint; SQLite
    cannot, so the table is made again without it (foreign keys are off for the run) from `columns` (its SQLite
    columns, in order), its rows and `indexes` as they were."""
    database = migrator.database
    if isinstance(database, PostgresqlDatabase):
        apply_operations(migrator.drop_foreign_key_constraint(table, "decision_id"))
        return
    kept = f"{table}_kept"
    names = ", ".join(f'"{name}"' for name, _ in columns)
    declared = ", ".join(f'"{name}" {kind}' for name, kind in columns)
    database.execute_sql(f'CREATE TABLE "{kept}" ({declared})')
    database.execute_sql(f'INSERT INTO "{kept}" ({names}) SELECT {names} FROM "{table}"')  # noqa: S608
    database.execute_sql(f'DROP TABLE "{table}"')
    database.execute_sql(f'ALTER TABLE "{kept}" RENAME TO "{table}"')
    for index in indexes:
        on = ", ".join(f'"{name}"' for name in index)
        database.execute_sql(f'CREATE INDEX "{table}_{"_".join(index)}" ON "{table}" ({on})')


MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "initial schema (frozen: storage/frozen/v1.*.sql)", _initial_schema),
    (2, "stage counts kept with every stage change", _stage_counts),
    (3, "people's accounts; who changed initiatives and the wallet", _accounts_and_attribution),
    (4, "each decision's policy and facts; the router's scorecard", _decision_evidence),
    (5, "accepted delivery ids; the reconciliation ledger", _reconciliation),
    (6, "the router's policy versions; each decision's rule; the rule on scorecard entries", _policy_as_data),
    (7, "dispatch jobs; whether each decision queued one", _dispatch_jobs),
    (8, "the scorecard's counted days kept by the jobs process, up to a mark", _scorecard_mark),
    (9, "since which version each live rule of a policy version has been live", _live_since),
    (
        10,
        "the loop: a job's failure, retry and forge write; a ticket's job and pull request; held decisions",
        _the_loop,
    ),
    (
        11,
        "a worker's bay and principal, its last call and refusal; the principal that claimed each job",
        _worker_boundary,
    ),
    (12, "how many rows of each kind the archivist moved out, per hour", _archived_counts),
    (
        13,
        "the scorecard's kept days summed by week too, and by rule version: counted again; its entries outlive their "
        "decisions, as the accepted event ids do; a ticket's decisions by time",
        _scorecard_weeks,
    ),
]


def migrate(migrations: Sequence[tuple[int, str, Migration]] = MIGRATIONS) -> list[int]:
    """Apply every migration not yet recorded, all in one locked transaction; return the versions applied now."""
    applied_now: list[int] = []
    with connection():
        migrator = SchemaMigrator.from_database(db.obj)
        # A transaction (BEGIN IMMEDIATE on SQLite: the write lock up front); on SQLite foreign keys are off
        # until it ends, since the pragma cannot change inside a transaction.
        with migrator.migration_context():
            if is_postgres():
                db.execute_sql("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK_KEY,))
            # The bookkeeping table itself never changes: every version's runner reads it.
            models.SchemaVersion.create_table(safe=True)
            done = {row.version for row in models.SchemaVersion.select(models.SchemaVersion.version)}
            known = max((version for version, _, _ in migrations), default=0)
            if done and max(done) > known:
                # A release older than the one that upgraded this database would run on a schema it does not
                # know (and its writes could break the newer release's rows): refuse, and say what to do.
                raise MigrationError(
                    f"the database is at schema version {max(done)}, newer than this release knows ({known}): "
                    "a newer svc upgraded it. Run that release, or restore the backup taken before the upgrade."
                )
            for version, _name, apply in migrations:
                if version in done:
                    continue
                apply(migrator)
                models.SchemaVersion.create(version=version, applied_at=datetime.now(UTC))
                applied_now.append(version)
            if applied_now and not is_postgres():
                dangling = db.execute_sql("PRAGMA foreign_key_check").fetchall()
                if dangling:
                    raise MigrationError(f"migrations {applied_now} leave dangling foreign keys: {dangling[:5]}")
    return applied_now


def current_version() -> int:
    with connection():
        row = (
            models.SchemaVersion.select(models.SchemaVersion.version)
            .order_by(models.SchemaVersion.version.desc())
            .first()
        )
    return row.version if row else 0
