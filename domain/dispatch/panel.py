"""What the web board shows of dispatch (rows in `storage/jobs.py`, their rules in `domain/dispatch/jobs.py`): the job
running in each bay with its last heartbeat, the queue in the order claims take it, and each live rule's jobs by
state. Reads only, inside the request's connection."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from storage import jobs as rows

QUEUE_SHOWN = 20


@dataclass(frozen=True)
class Running:
    """A running job as the bays panel shows it beside its bay."""

    job: Any
    claimed_at: datetime | None
    last_heartbeat: datetime | None


def last_heartbeat(job: Any, lease: timedelta) -> datetime | None:
    """When the worker last said it was alive: its last heartbeat, or its claim when it has sent none.

    No column keeps it: a claim sets `leased_until` to its time plus the lease (`SVC_WORKER_LEASE_SECONDS`) and each
    heartbeat renews it the same way, so the last of them was `leased_until - lease`. (A change of the lease setting
    since shifts this by the difference, until the next heartbeat.)"""
    if job.leased_until is None:
        return None
    return job.leased_until - lease


def running_by_bay(lease: timedelta) -> dict[str, Running]:
    """The running jobs, keyed by the bay each runs in."""
    return {job.bay: Running(job, job.claimed_at, last_heartbeat(job, lease)) for job in rows.running() if job.bay}


def queue(limit: int = QUEUE_SHOWN) -> tuple[list[Any], int]:
    """The queued jobs, oldest first (the order claims take them), `limit` at most, and how many are queued."""
    return rows.queued_oldest_first(limit=limit)


def jobs_by_state(rules: list[str]) -> dict[str, dict[str, int]]:
    """For each rule named, how many of its jobs are queued, running, succeeded, failed and cancelled."""
    return rows.counts_by_rule(rules)
