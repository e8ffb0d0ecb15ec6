"""The tables. Every model is bound to the `db` proxy; timestamps are stored as naive UTC and read back aware."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import orjson
from peewee import (
    BigAutoField,
    BigIntegerField,
    BooleanField,
    CharField,
    CompositeKey,
    DateTimeField,
    DoubleField,
    ForeignKeyField,
    IntegerField,
    Model,
    SqliteDatabase,
    TextField,
)

from storage.db import db


class UTCDateTimeField(DateTimeField):
    """Aware UTC datetimes in Python, naive UTC in the database (portable across SQLite and PostgreSQL)."""

    def db_value(self, value):
        if isinstance(value, datetime):  # the common case, on every row written
            if value.tzinfo is not None and value.tzinfo is not UTC:
                value = value.astimezone(UTC)
            if isinstance(db.obj, SqliteDatabase):
                # The text sqlite3's default adapter would write (no fraction when it is zero): written here, it spares
                # a Python callback per value inside every statement (and that adapter is deprecated from Python 3.12).
                # An aware value's text is cut before its "+00:00": dropping the zone first costs more.
                text = value.isoformat(" ")
                return text[:-6] if value.tzinfo is not None else text
            return value.replace(tzinfo=None)
        return super().db_value(value)

    def python_value(self, value):
        if isinstance(value, str):
            # SQLite's text, as `db_value` writes it ("2026-11-24 14:20:09.337753", or without the fraction when
            # it is zero): read in C, its zone named in the text (setting it afterwards with `replace` costs four
            # times the parse). peewee's parser tries its formats with `strptime`, and every ticket, wallet or
            # initiative the router reads carries two or three of these.
            try:
                value = stored_time(value + "+00:00")
            except ValueError:
                value = super().python_value(value)
        else:
            value = super().python_value(value)
        if isinstance(value, datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


class DayField(CharField):
    """A UTC day: a `date` in Python, its YYYY-MM-DD text in the database (which sorts as the days do)."""

    def db_value(self, value):
        return value.isoformat() if isinstance(value, date) else super().db_value(value)

    def python_value(self, value):
        return stored_day(value) if isinstance(value, str) else value


class JSONTextField(TextField):
    """JSON kept as text: the same bytes on SQLite and PostgreSQL, never queried into.

    Written by orjson (rows are written on every request); by json for what orjson refuses (an integer beyond
    64 bits, a lone surrogate, a key that is not a string). Read by json, which keeps big integers exact.
    """

    def db_value(self, value):
        if value is None:
            return None
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    def python_value(self, value):
        if value is None:
            return None
        return json.loads(value)


class BaseModel(Model):
    class Meta:
        database = db
        legacy_table_names = False


class SchemaVersion(BaseModel):
    """One row per applied migration."""

    version = IntegerField(primary_key=True)
    applied_at = UTCDateTimeField()


class Initiative(BaseModel):
    id = CharField(primary_key=True, max_length=64)
    name = CharField(max_length=200)
    stage = CharField(max_length=16, default="agree")
    created_at = UTCDateTimeField()
    updated_at = UTCDateTimeField()
    # Who created or last changed it: an account's name, the bootstrap user, or null (before migration 3).
    updated_by = CharField(max_length=128, null=True)


class Ticket(BaseModel):
    key = CharField(primary_key=True, max_length=64)
    initiative = ForeignKeyField(Initiative, column_name="initiative_id", backref="tickets", on_delete="RESTRICT")
    title = CharField(max_length=300)
    stage = CharField(max_length=16)
    waiting_on = CharField(max_length=32, null=True)
    tracker_issue_id = CharField(max_length=128, null=True)
    assigned_slot = CharField(max_length=64, null=True)
    link = TextField(null=True)
    # Stored, not computed per query, so the Needs-you list is an index range at any board size. It is
    # written in the same UPDATE as stage and waiting_on, by the one function that defines it.
    needs_you = BooleanField(default=False)
    # Bumped by every update; compare-and-swap on (stage, version) means two writers never both win.
    version = IntegerField(default=1)
    # The dispatch job a worker is on for it (queued or running; `machines/job.py`'s ACTIVE), kept with every move of
    # that job, so the Needs-you list stays an index range and a ticket reads its job without another statement.
    job_id = BigIntegerField(null=True)
    job_state = CharField(max_length=16, null=True)
    stage_changed_at = UTCDateTimeField()
    created_at = UTCDateTimeField()
    updated_at = UTCDateTimeField()

    class Meta:
        indexes = (
            (("stage", "key"), False),
            (("initiative", "key"), False),
            (("needs_you", "key"), False),
            (("needs_you", "stage_changed_at", "key"), False),
            (("stage", "stage_changed_at"), False),
            # The tracker normalizer finds the board ticket of a Linear issue by its id.
            (("tracker_issue_id",), False),
        )


class StageCount(BaseModel):
    """How many tickets each stage holds, kept in the transaction of every ticket insert and stage change, so
    the snapshot's counts cost the same on a board of a thousand tickets as on one of a million."""

    stage = CharField(primary_key=True, max_length=16)
    tickets = IntegerField(default=0)


class TimelineEntry(BaseModel):
    id = BigAutoField()
    ticket = ForeignKeyField(Ticket, column_name="ticket_key", backref="timeline", on_delete="CASCADE")
    at = UTCDateTimeField()
    kind = CharField(max_length=32)
    summary = TextField()
    data = JSONTextField(null=True)

    class Meta:
        indexes = ((("ticket", "id"), False),)


class AgentRun(BaseModel):
    id = BigAutoField()
    agent_id = CharField(max_length=32)
    status = CharField(max_length=64)
    ok = BooleanField()
    started_at = UTCDateTimeField()
    finished_at = UTCDateTimeField(null=True)
    summary = TextField(default="")
    details = JSONTextField(null=True)

    class Meta:
        indexes = ((("agent_id", "id"), False),)


class Setting(BaseModel):
    key = CharField(primary_key=True, max_length=64)
    value = JSONTextField()
    updated_at = UTCDateTimeField()
    updated_by = CharField(max_length=128, null=True)


class Slot(BaseModel):
    """A bay a worker runs in. Whether it is held is the presence of a `SlotClaim`."""

    name = CharField(primary_key=True, max_length=64)
    created_at = UTCDateTimeField()
    last_activity_at = UTCDateTimeField()
    last_wiped_at = UTCDateTimeField(null=True)
    # A bay wipe in progress holds the slot (a lease): no new claim while it runs, no second wipe beside it.
    wipe_owner = CharField(max_length=64, null=True)
    wipe_until = UTCDateTimeField(null=True)


class SlotClaim(BaseModel):
    """`slot_claims` of the seed: binds a ticket to a slot, at most one claim per slot."""

    slot = ForeignKeyField(Slot, column_name="slot_name", primary_key=True, backref="claim", on_delete="CASCADE")
    ticket = ForeignKeyField(Ticket, column_name="ticket_key", backref="claims", on_delete="CASCADE")
    claimed_at = UTCDateTimeField()

    class Meta:
        indexes = ((("ticket",), False),)


class Wallet(BaseModel):
    id = IntegerField(primary_key=True)
    budget = DoubleField(default=0.0)
    spent = DoubleField(default=0.0)
    locked = BooleanField(default=False)
    updated_at = UTCDateTimeField()
    updated_by = CharField(max_length=128, null=True)


class OutboxMessage(BaseModel):
    """A side effect that leaves the process, written in the transaction that caused it, delivered after commit."""

    id = BigAutoField()
    kind = CharField(max_length=32)
    payload = JSONTextField()
    status = CharField(max_length=16, default="pending")  # pending, sent, failed, skipped
    attempts = IntegerField(default=0)
    next_attempt_at = UTCDateTimeField()
    # A deliverer leases a message before the outbound call, so two jobs processes never send it twice.
    lease_owner = CharField(max_length=64, null=True)
    lease_until = UTCDateTimeField(null=True)
    last_error = TextField(null=True)
    created_at = UTCDateTimeField()
    updated_at = UTCDateTimeField()
    sent_at = UTCDateTimeField(null=True)

    class Meta:
        indexes = (
            (("status", "next_attempt_at", "id"), False),
            (("kind", "status"), False),
            # Chat pacing counts what went out in the last minute.
            (("kind", "sent_at"), False),
        )


class IdempotencyRecord(BaseModel):
    """The first answer to a request carrying an `Idempotency-Key`, replayed for repeats."""

    scope = CharField(max_length=64)
    key = CharField(max_length=200)
    request_hash = CharField(max_length=64)
    status_code = IntegerField()
    response = JSONTextField()
    created_at = UTCDateTimeField()

    class Meta:
        primary_key = False
        indexes = (
            (("scope", "key"), True),
            (("created_at",), False),
        )


class RouterDecision(BaseModel):
    id = BigAutoField()
    event_id = CharField(max_length=200, null=True)
    evaluated_at = UTCDateTimeField()
    mode = CharField(max_length=16, default="shadow")
    source = CharField(max_length=16, null=True)
    kind = CharField(max_length=32, null=True)
    subject_id = CharField(max_length=128, null=True)
    outcome = CharField(max_length=16)
    role = CharField(max_length=16, null=True)
    gates = JSONTextField()
    envelope = JSONTextField(null=True)
    errors = JSONTextField(null=True)
    # What the gates applied and read (`domain/policy/document.Policy.as_dict`, `board_view.Facts.as_dict`); None
    # on a rejected envelope and on decisions recorded before schema version 4 (not replayable).
    policy = JSONTextField(null=True)
    facts = JSONTextField(null=True)
    # The name of the policy's rule that matched the event (None: none did, or recorded before schema version 6,
    # when the rules were the first policy's three and a backtest finds the one that matched).
    rule = CharField(max_length=64, null=True)
    # Live dispatch (schema version 7): whether this decision queued a job, and which (`DispatchJob`; not a foreign
    # key, so the two tables refer to each other only one way).
    dispatched = BooleanField(default=False)
    job_id = BigIntegerField(null=True)
    # While dispatch was paused: the job it would have queued waits, `held` (schema version 10).
    held = BooleanField(default=False)

    class Meta:
        indexes = (
            (("outcome", "id"), False),
            (("source", "id"), False),
            (("subject_id", "id"), False),
            (("evaluated_at",), False),
            # Before the loop, the retry-budget gate counted a ticket's fixer decisions of the last day here.
            (("subject_id", "role", "outcome", "evaluated_at"), False),
            # What took a decision's work up, a window after it (`decisions.first_of_kinds`, each decision `svc import`
            # records): the subject's decisions of that window, not all of them.
            (("subject_id", "evaluated_at"), False),
        )


class AcceptedEvent(BaseModel):
    """The first accepted envelope of each event id: a redelivery finds it here and records nothing new."""

    event_id = CharField(primary_key=True, max_length=200)
    # The decision's id, not a reference to its row: an accepted id outlives its decision when the archivist moves
    # that out (schema version 13), so the same event is still a duplicate then (answered without its decision).
    decision = BigIntegerField(column_name="decision_id", index=True)
    received_at = UTCDateTimeField()


class AcceptedDelivery(BaseModel):
    """A webhook delivery the service accepted, by its sender's name for it (GitHub's `X-GitHub-Delivery`, GitLab's
    `Idempotency-Key` else `X-Gitlab-Event-UUID`, `Linear-Delivery`), kept for as long as the sender keeps its log:
    what lets the reconciler (`domain/ops/reconciler.py`) tell "never arrived" from "arrived". `decision` is what
    it became (None: a delivery that maps to no event, answered all the same)."""

    sender = CharField(max_length=16)
    delivery = CharField(max_length=200)
    decision = ForeignKeyField(RouterDecision, column_name="decision_id", null=True, on_delete="CASCADE")
    received_at = UTCDateTimeField()

    class Meta:
        primary_key = CompositeKey("sender", "delivery")
        indexes = ((("received_at",), False),)


class ReconciliationGap(BaseModel):
    """The reconciliation ledger: one row per delivery a sender says it failed to make and the service never
    accepted (`guid` its delivery's id, one row per sender, hook and guid), or per hook that could not be read
    (`guid` None), and what became of it: redelivered, recovered, given_up or refused_by_us."""

    id = BigAutoField()
    sender = CharField(max_length=16)
    hook = CharField(max_length=200)
    delivery = CharField(max_length=64, null=True)
    guid = CharField(max_length=200, null=True)
    event = CharField(max_length=64, null=True)
    found_at = UTCDateTimeField()
    updated_at = UTCDateTimeField()
    state = CharField(max_length=16)
    attempts = IntegerField(default=0)
    detail = TextField(default="")

    class Meta:
        indexes = (
            (("sender", "hook", "guid"), True),
            (("sender", "guid"), False),
            (("state", "updated_at"), False),
        )


class ScorecardEntry(BaseModel):
    """A decision the scorecard judges (a matched rule about a ticket, dispatched or blocked), kept as it is
    recorded, and when the team first took that work up after it (`domain/router/scorecard.py`)."""

    # The decision's id, not a reference to its row: the entry outlives the decision when the archivist moves that
    # out (schema version 13), so the scorecard answers the same over any range and window before and after.
    decision = BigIntegerField(column_name="decision_id", primary_key=True)
    subject_id = CharField(max_length=128)
    role = CharField(max_length=16)
    outcome = CharField(max_length=16)
    failed_gates = CharField(max_length=128)  # the gates that failed, comma-separated, in the contract's order
    evaluated_at = UTCDateTimeField()
    taken_up_at = UTCDateTimeField(null=True)
    # The rule that matched, and its version (of its name, role and conditions): a rule's evidence is counted under
    # one version of it. None on entries kept before schema version 6.
    rule = CharField(max_length=64, null=True)
    rule_version = CharField(max_length=12, null=True)

    class Meta:
        indexes = (
            (("subject_id", "role", "taken_up_at"), False),
            (("evaluated_at",), False),
            # A rule's evidence: its decisions of the last days, under one version of it.
            (("rule_version", "evaluated_at"), False),
        )


class ScorecardDay(BaseModel):
    """The scorecard's counts of one settled day (every window closed) that has entries, for the default window:
    counted once by the jobs process, then read instead of the day's entries (`ScorecardMark` says how far)."""

    window_seconds = IntegerField()
    day = DayField(max_length=10)  # YYYY-MM-DD, UTC
    key = CharField(max_length=48)  # "rule:coder:confirmed", "gate:fleet:held", ...
    count = IntegerField()

    class Meta:
        primary_key = CompositeKey("window_seconds", "day", "key")


class ScorecardWeek(BaseModel):
    """The kept days' counts summed by week (`week` the Monday that starts it), kept with them: a long range reads its
    whole weeks here and only the days at its ends in `ScorecardDay`. A week's row holds the days of it counted so
    far; it is read only for a week whose every day is counted."""

    window_seconds = IntegerField()
    week = DayField(max_length=10)  # YYYY-MM-DD, a Monday, UTC
    key = CharField(max_length=48)
    count = IntegerField()

    class Meta:
        primary_key = CompositeKey("window_seconds", "week", "key")


class ScorecardMark(BaseModel):
    """How far the settled days of one window length are counted: every day up to `through` (YYYY-MM-DD) has its
    counts in `ScorecardDay`, or has no entries. `version` is bumped by every change, so that a count made while
    an import dropped the days it covered is never kept (compare-and-swap)."""

    window_seconds = IntegerField(primary_key=True)
    through = DayField(max_length=10, null=True)  # None: nothing counted yet
    version = IntegerField(default=1)


class ArchivedCount(BaseModel):
    """How many rows of one kind the archivist moved out of the database (`domain/ops/archivist.py`), per hour of the
    rows' own time (`YYYY-MM-DD HH`, UTC): what a backtest over an archived range says it could not read, and how
    far the scorecard's archived days reach. Written in the transaction of the delete it counts."""

    kind = CharField(max_length=32)
    hour = CharField(max_length=13)
    count = IntegerField()

    class Meta:
        primary_key = CompositeKey("kind", "hour")


class RouterPolicyVersion(BaseModel):
    """One version of the router's policy (`domain/router/policy_versions.py`): the whole document, its version hash,
    who set it, when and why. The newest row is the policy in force; rows are never changed.

    `replaces` is the id of the version it followed (0 for the first) and is unique: of two changes made from the same
    version at once, the second cannot be stored, so the history stays one line."""

    id = BigAutoField()
    version = CharField(max_length=12)
    document = JSONTextField()
    set_by = CharField(max_length=128, null=True)
    set_at = UTCDateTimeField()
    reason = TextField()
    # The reason given for forcing the change (None: not forced).
    forced = TextField(null=True)
    replaces = BigIntegerField(unique=True)
    # Since which version each of its live rules has been live, worked out once as the version is stored: for each
    # rule live here that was live, under the same rule version, in the version this one replaced, {rule version:
    # the id of the version that made it live}; a live rule not named was made live by this version. None on
    # versions stored before it was kept, until the next start fills them (`domain/router/policy_versions.seed`).
    live_since = JSONTextField(null=True)


# A JSON document as a JSON column holds it.
JSON = dict[str, object] | list[object] | str | int | float | bool | None


class DispatchJob(BaseModel):
    """A job a live rule's decision queued for a worker in a bay (`domain/dispatch/jobs.py`): queued, running under
    a lease, then succeeded, failed or cancelled; and what its output had the service write to the forge."""

    id = BigAutoField()
    # The decision that queued it; an operator's retry queues another job for the same decision (`retry_of`).
    decision = ForeignKeyField(RouterDecision, column_name="decision_id", on_delete="CASCADE")
    event_id = CharField(max_length=200, null=True)
    ticket = CharField(max_length=64)
    role = CharField(max_length=16)
    rule = CharField(max_length=64, null=True)
    state = CharField(max_length=16)  # machines/job.py: queued, held, running, succeeded, failed, cancelled
    bay = CharField(max_length=64, null=True)
    # The worker account that claimed it last (kept after the job ends: it may still read what it held); which
    # principal of that name is `worker_principal`, below.
    worker = CharField(max_length=64, null=True)
    attempts = IntegerField(default=0)
    created_at = UTCDateTimeField()
    claimed_at = UTCDateTimeField(null=True)
    heartbeat_at = UTCDateTimeField(null=True)  # the claim, then each heartbeat: the workers panel's "last seen"
    leased_until = UTCDateTimeField(null=True)
    finished_at = UTCDateTimeField(null=True)
    result = JSONTextField(null=True)
    forge_pull_request = TextField(null=True)
    forge_comment = TextField(null=True)
    forge_error = TextField(null=True)
    # machines/forge_write.py: none, held, pending, written, failed, dropped.
    forge_state = CharField(max_length=16, default="none")
    # Why it failed or was cancelled: output, worker, lease, forge or cancelled, and in words (schema version 10
    # renamed `cancel_reason`, which held every kind, to `failure_detail`).
    failure_kind = CharField(max_length=16, null=True)
    failure_detail = TextField(null=True)
    # The job an operator's retry ran again (None: the decision's first job).
    retry_of = BigIntegerField(null=True)
    # A fixer's failing head: one fixer job per failing head of a ticket's pull request.
    head_sha = CharField(max_length=64, null=True)
    # Which principal of the name `worker` claimed it (`Account.principal`): a name removed and added again is another
    # worker, to which this job does not belong.
    worker_principal = CharField(max_length=32, null=True)

    class Meta:
        indexes = (
            # The oldest queued job (a claim), the running ones by lease (the reaper), a ticket's, a worker's.
            (("state", "id"), False),
            (("state", "leased_until"), False),
            (("ticket", "id"), False),
            (("worker", "id"), False),
        )


class PullRequest(BaseModel):
    """A ticket's pull request (GitLab: merge request), as the loop follows it (`domain/dispatch/pull_requests.py`):
    the one the service opened for its job, or the forge's whose branch or title names the ticket. Its latest head
    and, once merged, its merge commit are what pipeline events are matched against."""

    ticket = ForeignKeyField(Ticket, column_name="ticket_key", primary_key=True, on_delete="CASCADE")
    forge = CharField(max_length=16)  # github or gitlab
    repo = CharField(max_length=200, null=True)
    number = IntegerField(null=True)
    url = TextField(null=True)
    branch = CharField(max_length=255, null=True)
    state = CharField(max_length=16)  # open, merged, closed
    head_sha = CharField(max_length=64, null=True)
    merge_commit_sha = CharField(max_length=64, null=True)
    # The job whose output the service opened it from (None: the team opened it).
    job_id = BigIntegerField(null=True)
    # When a pipeline last passed on its latest head: a ticket's fixer jobs are counted from then on.
    green_at = UTCDateTimeField(null=True)
    updated_at = UTCDateTimeField()

    class Meta:
        indexes = (
            (("head_sha",), False),
            (("merge_commit_sha",), False),
            (("repo", "number"), False),
        )


class JobState(BaseModel):
    """What the jobs process knows of each scheduled job: the last scheduled time it ran for, and when."""

    job = CharField(primary_key=True, max_length=64)
    last_slot = UTCDateTimeField(null=True)
    last_started_at = UTCDateTimeField(null=True)
    last_finished_at = UTCDateTimeField(null=True)
    lease_owner = CharField(max_length=64, null=True)
    lease_until = UTCDateTimeField(null=True)


class Account(BaseModel):
    """A person's login. The password is kept only as its argon2id hash (which also says its own parameters);
    a new password means a new hash, so processes that remembered the old one notice the change."""

    name = CharField(primary_key=True, max_length=64)
    role = CharField(max_length=16)  # viewer, operator or worker
    password_hash = TextField()
    created_at = UTCDateTimeField()
    password_changed_at = UTCDateTimeField()
    # Drawn anew each time an account is added: one removed and added again under its name is another principal, to
    # which the jobs of its predecessor (`DispatchJob.worker_principal`) do not belong.
    principal = CharField(max_length=32)
    # A worker's bay, the one slot it may claim into (its name unless `svc user add --bay` said otherwise).
    bay = CharField(max_length=64, null=True)
    # A worker's last call (a claim, a heartbeat, a result) and its last refusal, with why: the bays panel's.
    last_heard_at = UTCDateTimeField(null=True)
    refused_at = UTCDateTimeField(null=True)
    refusal = TextField(null=True)


ALL_MODELS: tuple[type[BaseModel], ...] = (
    SchemaVersion,
    Initiative,
    Ticket,
    StageCount,
    TimelineEntry,
    AgentRun,
    Setting,
    Slot,
    SlotClaim,
    Wallet,
    OutboxMessage,
    IdempotencyRecord,
    RouterDecision,
    AcceptedEvent,
    AcceptedDelivery,
    ReconciliationGap,
    JobState,
    Account,
    ScorecardEntry,
    ScorecardDay,
    ScorecardWeek,
    ScorecardMark,
    RouterPolicyVersion,
    DispatchJob,
    PullRequest,
    ArchivedCount,
)


def stored_time(text: str) -> datetime:
    """A moment as the database wrote it in text (SQLite's "2026-11-24 14:20:09.337753", an aggregate's, a JSON
    column's ISO text), read in C: naive when the text names no zone. The one reading of the database's times text;
    raises ValueError."""
    return datetime.fromisoformat(text)


def stored_day(text: str) -> date:
    """A day as the database keeps it (YYYY-MM-DD, `DayField`). The one reading of the database's days text; raises
    ValueError."""
    return date.fromisoformat(text)
