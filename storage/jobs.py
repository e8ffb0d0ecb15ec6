"""Dispatch job rows (`domain/dispatch/jobs.py` decides what goes in them): queued by a live rule's decision, claimed
by a worker in a bay under a lease, finished with its output, and what the service wrote to the forge for it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from peewee import fn

from storage import statements
from storage.db import is_postgres
from storage.models import DispatchJob, RouterDecision
from storage.paging import decode_cursor, page_of

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
STATES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED)
_TABLE = DispatchJob._meta.table_name
# pg_advisory_xact_lock key of the claims (the migrations' is 0x5C5D_0001): any constant no other application uses.
_PG_CLAIMS_KEY = 0x5C5D_0002


def insert(*, decision_id: int, event_id: str | None, ticket: str, role: str, rule: str | None, at: datetime) -> Any:
    """A queued job for the decision (a second one for the same decision fails with IntegrityError)."""
    return statements.insert(
        DispatchJob,
        {
            "decision": decision_id,
            "event_id": event_id,
            "ticket": ticket,
            "role": role,
            "rule": rule,
            "state": QUEUED,
            "attempts": 0,
            "created_at": at,
        },
    )


def mark_dispatched(decision_id: int, job_id: int) -> None:
    """The decision says it queued this job (in the transaction that recorded both)."""
    statements.update(RouterDecision, {"dispatched": True, "job_id": job_id}, {"id": decision_id})


def get(job_id: int, *, for_update: bool = False) -> Any | None:
    """The job (a record), locked for the rest of the transaction on PostgreSQL when `for_update`."""
    return statements.select_one(DispatchJob, {"id": job_id}, for_update=for_update)


def serialise_claims() -> None:
    """Make claims take turns until the transaction ends, so the running jobs a claim counts and the queued job it
    takes are what they stay until it commits. On PostgreSQL a transaction-scoped advisory lock (every API process
    takes the same one); SQLite's single writer already runs one write transaction at a time."""
    if is_postgres():
        statements.scalar(("claims_lock",), lambda p: f"SELECT pg_advisory_xact_lock({p})", [_PG_CLAIMS_KEY])


def count_running() -> int:
    return (
        statements.scalar(
            ("jobs_running",),
            lambda p: f'SELECT COUNT(*) FROM "{_TABLE}" WHERE "state" = {p}',  # noqa: S608 (our table)
            [RUNNING],
        )
        or 0
    )


def oldest_queued(*, after: int = 0) -> Any | None:
    """The queued job with the smallest id (the oldest) above `after`, or None."""
    found = statements.rows(
        DispatchJob,
        ("oldest_queued",),
        lambda p: f'WHERE "state" = {p} AND "id" > {p} ORDER BY "id" LIMIT 1',
        [QUEUED, after],
    )
    return found[0] if found else None


def swap(job_id: int, *, expected_state: str, changes: dict[str, Any], worker: str | None = None) -> bool:
    """`UPDATE dispatch_job SET <changes> WHERE id = ? AND state = ? [AND worker = ?]`: False when it touched no row
    (the job moved on meanwhile)."""
    where: dict[str, Any] = {"id": job_id, "state": expected_state}
    if worker is not None:
        where["worker"] = worker
    return statements.update(DispatchJob, changes, where) == 1


def set_forge(
    job_id: int, *, pull_request: str | None = None, comment: str | None = None, error: str | None = None
) -> bool:
    """Record what was written to the forge for the job. The pull request only once (`UPDATE ... WHERE
    forge_pull_request IS NULL`): False when it was recorded already."""
    if pull_request is not None:
        touched = (
            DispatchJob.update(forge_pull_request=pull_request, forge_error=None)
            .where((DispatchJob.id == job_id) & DispatchJob.forge_pull_request.is_null())
            .execute()
        )
        return touched == 1
    changes: dict[str, Any] = {}
    if comment is not None:
        changes["forge_comment"] = comment
    if error is not None:
        changes["forge_error"] = error
    return statements.update(DispatchJob, changes, {"id": job_id}) == 1 if changes else False


def lease_ran_out(now: datetime, *, limit: int) -> list[Any]:
    """Running jobs whose lease ended before `now`, the longest expired first."""
    return statements.rows(
        DispatchJob,
        ("lease_ran_out", limit),
        lambda p: f'WHERE "state" = {p} AND "leased_until" < {p} ORDER BY "leased_until" LIMIT {int(limit)}',
        [RUNNING, DispatchJob.leased_until.db_value(now)],
    )


def page(
    *, limit: int, cursor: str | None = None, state: str | None = None, ticket: str | None = None
) -> tuple[list[Any], str | None]:
    """Jobs newest first (by id), filtered; keyset-paged on the id."""
    query = DispatchJob.select()
    if state is not None:
        query = query.where(DispatchJob.state == state)
    if ticket is not None:
        query = query.where(DispatchJob.ticket == ticket)
    if cursor:
        (before,) = decode_cursor(cursor, int)
        query = query.where(DispatchJob.id < before)
    rows = list(query.order_by(DispatchJob.id.desc()).limit(limit + 1))
    return page_of(rows, limit, lambda job: [job.id])


def counts_by_rule() -> dict[str | None, dict[str, int]]:
    """rule -> state -> how many jobs."""
    found: dict[str | None, dict[str, int]] = {}
    query = DispatchJob.select(DispatchJob.rule, DispatchJob.state, fn.COUNT(DispatchJob.id)).group_by(
        DispatchJob.rule, DispatchJob.state
    )
    for rule, state, count in query.tuples():
        found.setdefault(rule, {})[state] = count
    return found


def running_held_by(worker: str, principal: str) -> Any | None:
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


def pull_requests_of(ticket: str) -> set[str]:
    """The addresses of the pull requests the service recorded for the jobs of `ticket` (its (ticket, id) index)."""
    query = DispatchJob.select(DispatchJob.forge_pull_request).where(
        (DispatchJob.ticket == ticket) & DispatchJob.forge_pull_request.is_null(False)
    )
    return {url for (url,) in query.tuples()}


# -- what the web board reads ------------------------------------------------------------------------------------


def queued_oldest_first(*, limit: int) -> tuple[list[Any], int]:
    """The queued jobs in the order claims take them (the oldest, by id, first), `limit` at most, and how many are
    queued in all."""
    shown = list(DispatchJob.select().where(DispatchJob.state == QUEUED).order_by(DispatchJob.id).limit(limit))
    total = len(shown) if len(shown) < limit else DispatchJob.select().where(DispatchJob.state == QUEUED).count()
    return shown, total


def running() -> list[Any]:
    """Every running job (at most the policy's fleet size, give or take a change of it), the oldest claim first."""
    return list(DispatchJob.select().where(DispatchJob.state == RUNNING).order_by(DispatchJob.claimed_at))
