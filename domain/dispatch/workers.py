"""The workers (accounts with role `worker`, `domain/accounts.py`): each is bound to its bay and to one job at a time,
and is the principal it was added as. What the dispatch jobs' units of work (`domain/dispatch/jobs.py`) ask of them,
and what `GET dispatch/workers` and the board's bays panel show of them.

- A worker claims only into its own bay (`svc user add NAME --role worker [--bay BAY]`, its name by default): any
  other is `WrongBay` (403). A worker that holds a running job claims nothing more until it hands back its result:
  `StillRunning` (409), before anything else a claim could answer (a pause, a full fleet, an empty queue: 204).
- An account removed and added again under its name is another principal (`Account.principal`, drawn anew): the
  jobs its predecessor claimed are not its own (409 to a heartbeat or a result, `jobs.JobNotHeld`).
- Each call is heard (`last_heard_at`), and each refusal is kept with why (`refusal`, `refused_at`), so the board
  shows a worker that is being refused, and why, rather than a worker that seems idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from domain import units
from domain.errors import Conflict, Forbidden
from storage import accounts
from storage import jobs as rows
from storage.jobs import Job
from storage.models import Account

# A refusal kept for the board is cut to this many characters; the bays panel lists at most this many workers.
REFUSAL_LENGTH = 500
WORKERS_SHOWN = 200


class WrongBay(Forbidden):
    """A worker claimed into a bay other than its own."""


class StillRunning(Conflict):
    """A worker that holds a running job claimed another."""


class Predecessors(Conflict):
    """A worker asked about a job that an earlier account of its name claimed."""


@dataclass(frozen=True)
class Worker:
    name: str
    principal: str
    bay: str


@dataclass(frozen=True)
class WorkerView:
    """One worker as `GET dispatch/workers` and the bays panel show it: its bay, the job it runs (its id, or None),
    when it was last heard, and its last refusal when that is its latest word (a worker being refused)."""

    account: str
    bay: str
    job: Job | None  # the running job it holds
    last_heard_at: datetime | None
    refused_at: datetime | None
    refusal: str | None

    @property
    def being_refused(self) -> bool:
        return self.refused_at is not None and (self.last_heard_at is None or self.refused_at >= self.last_heard_at)


def worker(name: str) -> Worker | None:
    """The worker account called `name` as it is now (inside a unit of work), or None."""
    account = accounts.get(name)
    if account is None or account.role != "worker":
        return None
    return Worker(account.name, account.principal, account.bay or account.name)


def admit_claim(name: str, bay: str, *, now: datetime) -> Worker:
    """Inside a claim's unit of work, before anything else: the worker, heard; `WrongBay` for another bay than its
    own, `StillRunning` while it holds a running job."""
    me = worker(name)
    if me is None:
        raise Forbidden(f"{name} is no worker account (any more)")
    if bay != me.bay:
        raise WrongBay(f"{name} is the worker of bay {me.bay}: it claims jobs into its own bay only, not into {bay}")
    held = rows.running_held_by(name, me.principal)
    if held is not None:
        raise StillRunning(
            f"{name} holds job {held.id}, running in {held.bay}: one job at a time; send its result (or let its "
            "lease run out) before claiming another"
        )
    accounts.heard(name, me.principal, at=now)
    return me


def heard(name: str, *, now: datetime) -> None:
    """Inside a heartbeat's or a result's unit of work: the worker called."""
    me = worker(name)
    if me is not None:
        accounts.heard(name, me.principal, at=now)


def holds(job: Job, name: str) -> bool:
    """Whether the worker called `name` now is the principal that claimed `job` (a job claimed before principals
    were kept goes by the name alone)."""
    if job.worker != name:
        return False
    if job.worker_principal is None:
        return True
    me = worker(name)
    return me is not None and me.principal == job.worker_principal


def whose(job: Job, name: str) -> str:
    """Words for a refusal: that `job` was claimed by an earlier account called `name` (else nothing)."""
    if job.worker == name and not holds(job, name):
        return f" (it was claimed by an earlier account called {name}, removed since: another principal)"
    return ""


def check_predecessor(job: Job, name: str) -> None:
    """`Predecessors` when `job` was claimed by an earlier account called `name`, not by the one asking."""
    if job.worker == name and not holds(job, name):
        raise Predecessors(
            f"job {job.id} was claimed by an earlier account called {name}, removed since: it is not this worker's"
        )


def refused(name: str, why: str, *, at: datetime) -> None:
    """In a unit of its own, after a worker's call was refused (the refused call changed nothing): why, for the
    board. The one thing a refused request leaves, so that a worker refused over and over shows as such."""

    def work() -> None:
        me = worker(name)
        if me is not None:
            accounts.refused(name, me.principal, why[:REFUSAL_LENGTH], at=at)

    units.run(work, what=f"recording the refusal of {name}")


def page(*, limit: int, cursor: str | None) -> tuple[list[WorkerView], str | None]:
    """The workers by name, each with its bay, the job it runs and when it was last heard (one connection)."""
    found, after = accounts.workers_page(limit=limit, cursor=cursor)
    return _views(found), after


def everyone(limit: int = WORKERS_SHOWN) -> list[WorkerView]:
    """The workers the bays panel shows, by name."""
    found, _ = accounts.workers_page(limit=limit, cursor=None)
    return _views(found)


def _views(found: list[Account]) -> list[WorkerView]:
    running = {(job.worker, job.worker_principal): job for job in rows.running()}
    views = []
    for account in found:
        job = running.get((account.name, account.principal)) or running.get((account.name, None))
        views.append(
            WorkerView(
                account=account.name,
                bay=account.bay or account.name,
                job=job,
                last_heard_at=account.last_heard_at,
                refused_at=account.refused_at,
                refusal=account.refusal,
            )
        )
    return views
