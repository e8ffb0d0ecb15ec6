"""Dispatch job rows (`domain/dispatch/jobs.py` decides what goes in them, `machines/job.py` which state follows
which): queued or held by a live rule's decision, claimed by a worker in a bay under a lease, finished with its
output, and what the service wrote to the forge for it. Every read returns `Job` records."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from peewee import JOIN, fn

from storage import statements
from storage.db import is_postgres
from storage.models import JSON, DispatchJob, PullRequest, RouterDecision
from storage.paging import decode_cursor, page_of

__all__ = ["Job"]


@statements.record_of(DispatchJob)
@dataclass(slots=True, eq=False)
class Job:
    """A dispatch job as every reader holds it: what `DispatchJob` rows are read into, its fields the model's in the
    table's order, each named as a model instance reads it (`record_of` checks so)."""

    id: int
    decision_id: int
    event_id: str | None
    ticket: str
    role: str
    rule: str | None
    state: str
    bay: str | None
    worker: str | None
    attempts: int
    created_at: datetime
    claimed_at: datetime | None
    heartbeat_at: datetime | None
    leased_until: datetime | None
    finished_at: datetime | None
    result: JSON
    forge_pull_request: str | None
    forge_comment: str | None
    forge_error: str | None
    forge_state: str
    failure_kind: str | None
    failure_detail: str | None
    retry_of: int | None
    head_sha: str | None
    worker_principal: str | None


_TABLE = DispatchJob._meta.table_name
_PULL_REQUESTS = PullRequest._meta.table_name
# pg_advisory_xact_lock key of the claims (the migrations' is 0x5C5D_0001): any constant no other application uses.
_PG_CLAIMS_KEY = 0x5C5D_0002
QUEUED, HELD, RUNNING = "queued", "held", "running"


def insert(
    *,
    decision_id: int,
    event_id: str | None,
    ticket: str,
    role: str,
    rule: str | None,
    state: str,
    at: datetime,
    retry_of: int | None = None,
    head_sha: str | None = None,
) -> Job:
    """A new job for the decision, in `state` (queued or held)."""
    return statements.insert(
        DispatchJob,
        {
            "decision": decision_id,
            "event_id": event_id,
            "ticket": ticket,
            "role": role,
            "rule": rule,
            "state": state,
            "attempts": 0,
            "created_at": at,
            "retry_of": retry_of,
            "head_sha": head_sha,
            "forge_state": "none",
        },
    )


def mark_dispatched(decision_id: int, job_id: int, *, held: bool) -> None:
    """The decision says which job it queued, or holds while dispatch is paused (in the transaction of both)."""
    statements.update(RouterDecision, {"dispatched": not held, "held": held, "job_id": job_id}, {"id": decision_id})


def get(job_id: int, *, for_update: bool = False) -> Job | None:
    """The job, locked for the rest of the transaction on PostgreSQL when `for_update`."""
    return statements.select_one(DispatchJob, {"id": job_id}, for_update=for_update)


def serialise_claims() -> None:
    """Make claims take turns until the transaction ends, so the running jobs a claim counts and the queued job it
    takes are what they stay until it commits. On PostgreSQL a transaction-scoped advisory lock (every API process
    takes the same one); SQLite's single writer already runs one write transaction at a time."""
    if is_postgres():
        statements.scalar(("claims_lock",), lambda p: f"SELECT pg_advisory_xact_lock({p})", [_PG_CLAIMS_KEY])


def count_running() -> int:
    """How many jobs run now: what the fleet gate and a claim both count."""
    return (
        statements.scalar(
            ("jobs_running",),
            lambda p: f'SELECT COUNT(*) FROM "{_TABLE}" WHERE "state" = {p}',  # noqa: S608 (our table)
            [RUNNING],
        )
        or 0
    )


def oldest_queued(*, after: int = 0) -> Job | None:
    """The queued job with the smallest id (the oldest) above `after`, or None."""
    found = statements.rows(
        DispatchJob,
        ("oldest_queued",),
        lambda p: f'WHERE "state" = {p} AND "id" > {p} ORDER BY "id" LIMIT 1',
        [QUEUED, after],
    )
    return found[0] if found else None


def swap(job_id: int, *, expected_state: str, changes: Mapping[str, object], worker: str | None = None) -> bool:
    """`UPDATE dispatch_job SET <changes> WHERE id = ? AND state = ? [AND worker = ?]`: False when it touched no row
    (the job moved on meanwhile)."""
    where: dict[str, object] = {"id": job_id, "state": expected_state}
    if worker is not None:
        where["worker"] = worker
    return statements.update(DispatchJob, dict(changes), where) == 1


def set_forge(job_id: int, *, expected_state: str, changes: Mapping[str, object]) -> bool:
    """Change what the job's forge write came to (`forge_state` and the forge members), where its forge state is
    still `expected_state`: False when it moved on meanwhile."""
    return statements.update(DispatchJob, dict(changes), {"id": job_id, "forge_state": expected_state}) == 1


def record_pull_request(job_id: int, url: str) -> bool:
    """The pull request written for the job, once (`UPDATE ... WHERE forge_pull_request IS NULL`): False when it
    was recorded already."""
    touched = (
        DispatchJob.update(forge_pull_request=url, forge_error=None)
        .where((DispatchJob.id == job_id) & DispatchJob.forge_pull_request.is_null())
        .execute()
    )
    return touched == 1


def lease_ran_out(now: datetime, *, limit: int) -> list[Job]:
    """Running jobs whose lease ended before `now`, the longest expired first."""
    return statements.rows(
        DispatchJob,
        ("lease_ran_out", limit),
        lambda p: f'WHERE "state" = {p} AND "leased_until" < {p} ORDER BY "leased_until" LIMIT {int(limit)}',
        [RUNNING, DispatchJob.leased_until.db_value(now)],
    )


def of_ticket(ticket: str, *, states: Iterable[str]) -> list[Job]:
    """The ticket's jobs in one of `states`, oldest first."""
    wanted = tuple(states)
    return _jobs(
        DispatchJob.select()
        .where((DispatchJob.ticket == ticket) & DispatchJob.state.in_(wanted))
        .order_by(DispatchJob.id)
    )


def fixer_for_head(ticket: str, head_sha: str) -> Job | None:
    """The ticket's newest fixer job for the failing head `head_sha`, whatever became of it."""
    found = _jobs(
        DispatchJob.select()
        .where((DispatchJob.ticket == ticket) & (DispatchJob.role == "fixer") & (DispatchJob.head_sha == head_sha))
        .order_by(DispatchJob.id.desc())
        .limit(1)
    )
    return found[0] if found else None


def count_fixers_since_green(ticket: str, *, other_than_head: str | None) -> int:
    """The ticket's fixer jobs (queued, held, running or ended) since its pull request's last green pipeline (all of
    them when it has none), those for the head `other_than_head` left out. One composed statement: the retry budget
    gate reads it for every event a fixer rule matches."""

    def sql(p: str) -> str:
        other = f' AND (j."head_sha" IS NULL OR j."head_sha" <> {p})' if other_than_head else ""
        # Our own tables; every value is a parameter.
        green = f'SELECT 1 FROM "{_PULL_REQUESTS}" AS pr WHERE pr."ticket_key" = j."ticket"'  # noqa: S608
        green += ' AND pr."green_at" IS NOT NULL AND j."created_at" <= pr."green_at"'
        where = f'j."ticket" = {p} AND j."role" = {p}{other} AND NOT EXISTS ({green})'
        return f'SELECT COUNT(*) FROM "{_TABLE}" AS j WHERE {where}'  # noqa: S608

    params: list[object] = [ticket, "fixer", *([other_than_head] if other_than_head else [])]
    return statements.scalar(("fixers_since_green", other_than_head is not None), sql, params) or 0


def fixer_times_since_green() -> dict[str, list[datetime]]:
    """Each ticket's fixer jobs since its pull request's last green pipeline, by when each was made (a replay's
    snapshot of the board)."""
    query = (
        DispatchJob.select(DispatchJob.ticket, DispatchJob.created_at)
        .join(PullRequest, JOIN.LEFT_OUTER, on=(PullRequest.ticket == DispatchJob.ticket))
        .where(
            (DispatchJob.role == "fixer")
            & (PullRequest.green_at.is_null() | (DispatchJob.created_at > PullRequest.green_at))
        )
        .order_by(DispatchJob.id)
    )
    times: dict[str, list[datetime]] = {}
    for ticket, at in query.tuples():
        times.setdefault(ticket, []).append(at)
    return times


def held_oldest_first() -> list[Job]:
    """Every held job, the oldest first: what resuming dispatch queues, in that order."""
    return _jobs(DispatchJob.select().where(DispatchJob.state == HELD).order_by(DispatchJob.id))


def forge_held() -> list[Job]:
    """Every job whose forge write is held (dispatch was paused), the oldest first."""
    return _jobs(DispatchJob.select().where(DispatchJob.forge_state == "held").order_by(DispatchJob.id))


def page(
    *, limit: int, cursor: str | None = None, state: str | None = None, ticket: str | None = None
) -> tuple[list[Job], str | None]:
    """Jobs newest first (by id), filtered; keyset-paged on the id."""
    query = DispatchJob.select()
    if state is not None:
        query = query.where(DispatchJob.state == state)
    if ticket is not None:
        query = query.where(DispatchJob.ticket == ticket)
    if cursor:
        (before,) = decode_cursor(cursor, int)
        query = query.where(DispatchJob.id < before)
    found = _jobs(query.order_by(DispatchJob.id.desc()).limit(limit + 1))
    return page_of(found, limit, lambda job: [job.id])


def counts_by_rule() -> dict[str | None, dict[str, int]]:
    """rule -> state -> how many jobs."""
    found: dict[str | None, dict[str, int]] = {}
    query = DispatchJob.select(DispatchJob.rule, DispatchJob.state, fn.COUNT(DispatchJob.id)).group_by(
        DispatchJob.rule, DispatchJob.state
    )
    for rule, state, count in query.tuples():
        found.setdefault(rule, {})[state] = count
    return found


def running_held_by(worker: str, principal: str) -> Job | None:
    """A running job the worker `worker` (that principal of the name, or a claim from before principals were kept)
    holds, or None (one read of the (worker, id) index)."""
    found = (
        DispatchJob.select()
        .where(
            (DispatchJob.worker == worker)
            & (DispatchJob.state == RUNNING)
            & ((DispatchJob.worker_principal == principal) | DispatchJob.worker_principal.is_null())
        )
        .limit(1)
    )
    return next(iter(found), None)


def held_by(worker: str, *, ticket: str | None = None, job_id: int | None = None, principal: str | None = None) -> bool:
    """Whether `worker` claimed (and so holds or held) the job `job_id`, or a job of `ticket`; that `principal` of
    the name when one is given (or a claim from before principals were kept)."""
    query = DispatchJob.select(DispatchJob.id).where(DispatchJob.worker == worker)
    if principal is not None:
        query = query.where((DispatchJob.worker_principal == principal) | DispatchJob.worker_principal.is_null())
    if ticket is not None:
        query = query.where(DispatchJob.ticket == ticket)
    if job_id is not None:
        query = query.where(DispatchJob.id == job_id)
    return query.exists()


def any_of_ticket(ticket: str) -> bool:
    """Whether the ticket ever had a dispatch job."""
    return DispatchJob.select(DispatchJob.id).where(DispatchJob.ticket == ticket).exists()


def pull_requests_of(ticket: str) -> set[str]:
    """The addresses of the pull requests the service recorded for the jobs of `ticket` (its (ticket, id) index)."""
    query = DispatchJob.select(DispatchJob.forge_pull_request).where(
        (DispatchJob.ticket == ticket) & DispatchJob.forge_pull_request.is_null(False)
    )
    return {url for (url,) in query.tuples()}


# -- what the web board reads ------------------------------------------------------------------------------------


def queued_oldest_first(*, limit: int) -> tuple[list[Job], int]:
    """The queued and held jobs in the order claims (or a resume) take them (the oldest, by id, first), `limit` at
    most, and how many are waiting in all."""
    waiting = DispatchJob.state.in_((QUEUED, HELD))
    shown = _jobs(DispatchJob.select().where(waiting).order_by(DispatchJob.id).limit(limit))
    total = len(shown) if len(shown) < limit else DispatchJob.select().where(waiting).count()
    return shown, total


def running() -> list[Job]:
    """Every running job (at most the policy's fleet size, give or take a change of it), the oldest claim first."""
    return _jobs(DispatchJob.select().where(DispatchJob.state == RUNNING).order_by(DispatchJob.claimed_at))


def _jobs(query) -> list[Job]:
    """The records of a query over every column of `DispatchJob`, in the table's order (which `Job` declares)."""
    return [Job(*values) for values in query.tuples()]


def result_of(job: Job) -> Mapping[str, JSON]:
    """The job's output as an object (an empty one when it kept none, or kept something else)."""
    return job.result if isinstance(job.result, dict) else {}
