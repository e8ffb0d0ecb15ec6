"""What the web board shows of dispatch (rows in `storage/jobs.py`, their lifecycle in `machines/job.py`): the job
running in each bay with its last heartbeat, the queue in the order claims take it with why each job waits, and
each live rule's jobs by state. Reads only, inside the request's connection."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from domain.dispatch import switch
from domain.policy.in_force import PolicyInForce
from machines import job as machine
from storage import jobs as rows
from storage import tickets
from storage.jobs import Job

QUEUE_SHOWN = 20


@dataclass(frozen=True)
class Running:
    """A running job as the bays panel shows it beside its bay."""

    job: Job
    claimed_at: datetime | None
    last_heartbeat: datetime | None


@dataclass(frozen=True)
class Waiting:
    """A job waiting to be claimed (queued, or held while paused), and why it waits, in words."""

    job: Job
    why: str


def running_by_bay() -> dict[str, Running]:
    """The running jobs, keyed by the bay each runs in, each with when its worker was last heard of (`heartbeat_at`:
    the claim, then each heartbeat)."""
    return {job.bay: Running(job, job.claimed_at, job.heartbeat_at) for job in rows.running() if job.bay}


def queue(policy: PolicyInForce, limit: int = QUEUE_SHOWN) -> tuple[list[Waiting], int]:
    """The waiting jobs, oldest first (the order claims take them), `limit` at most, each with why it waits (dispatch
    paused, the fleet full, its ticket's bay, or a worker's claim); and how many wait in all."""
    shown, total = rows.queued_oldest_first(limit=limit)
    if not shown:
        return [], total
    paused = switch.read().paused
    running = rows.count_running()
    size = policy().fleet_size
    waiting = []
    for job in shown:
        if job.state == machine.HELD:
            why = "held: dispatch is paused; it is queued when it resumes"
        elif paused:
            why = "dispatch is paused: no job is claimed until it resumes"
        elif running >= size:
            why = f"the fleet is full: {running} job(s) running, fleet size {size}"
        else:
            ticket = tickets.get(job.ticket)
            bay = ticket.assigned_slot if ticket is not None else None
            why = f"waits for the worker of bay {bay}, which its ticket holds" if bay else "waits for a worker's claim"
        waiting.append(Waiting(job, why))
    return waiting, total


def jobs_by_state(rules: list[str]) -> dict[str, dict[str, int]]:
    """For each rule named, how many of its jobs are in each state."""
    counted = rows.counts_by_rule()
    return {rule: {state: counted.get(rule, {}).get(state, 0) for state in machine.STATES} for rule in rules}
