"""What the web board shows of dispatch (rows in `storage/jobs.py`, their rules in `domain/dispatch/jobs.py`): the job
running in each bay with its last heartbeat, the queue in the order claims take it, and each live rule's jobs by
state. Reads only, inside the request's connection."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storage import jobs as rows

QUEUE_SHOWN = 20


@dataclass(frozen=True)
class Running:
    """A running job as the bays panel shows it beside its bay."""

    job: Any
    claimed_at: datetime | None
    last_heartbeat: datetime | None


def running_by_bay() -> dict[str, Running]:
    """The running jobs, keyed by the bay each runs in, each with when its worker was last heard of (`heartbeat_at`:
    the claim, then each heartbeat)."""
    return {job.bay: Running(job, job.claimed_at, job.heartbeat_at) for job in rows.running() if job.bay}


def queue(limit: int = QUEUE_SHOWN) -> tuple[list[Any], int]:
    """The queued jobs, oldest first (the order claims take them), `limit` at most, and how many are queued."""
    return rows.queued_oldest_first(limit=limit)


def jobs_by_state(rules: list[str]) -> dict[str, dict[str, int]]:
    """For each rule named, how many of its jobs are queued, running, succeeded, failed and cancelled."""
    counted = rows.counts_by_rule()
    return {rule: {state: counted.get(rule, {}).get(state, 0) for state in rows.STATES} for rule in rules}
