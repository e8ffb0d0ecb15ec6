"""What the jobs process keeps per scheduled job: the due time it last ran for, and a heartbeat."""

from __future__ import annotations

from datetime import datetime

from storage.models import JobState

HEARTBEAT_JOB = "jobs-heartbeat"


def last_slots(jobs: list[str]) -> dict[str, datetime | None]:
    """job -> the due time it last ran for (missing when it never ran)."""
    return {s.job: s.last_slot for s in JobState.select(JobState.job, JobState.last_slot).where(JobState.job.in_(jobs))}


def claim(job: str, slot: datetime, *, owner: str, at: datetime) -> bool:
    """Take the run of `job` due at `slot` (compare-and-swap on `last_slot`); False when it was already taken."""
    JobState.insert(job=job).on_conflict_ignore().execute()
    taken = (
        JobState.update(last_slot=slot, last_started_at=at, lease_owner=owner)
        .where((JobState.job == job) & (JobState.last_slot.is_null() | (JobState.last_slot < slot)))
        .execute()
    )
    return taken == 1


def finished(job: str, *, at: datetime) -> None:
    JobState.update(last_finished_at=at).where(JobState.job == job).execute()


def beat(*, owner: str, at: datetime) -> None:
    JobState.insert(job=HEARTBEAT_JOB).on_conflict_ignore().execute()
    JobState.update(last_started_at=at, lease_owner=owner).where(JobState.job == HEARTBEAT_JOB).execute()


def last_beat() -> datetime | None:
    row = JobState.get_or_none(JobState.job == HEARTBEAT_JOB)
    return row.last_started_at if row is not None else None
