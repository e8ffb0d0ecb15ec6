"""When each agent is due, in UTC whatever the host's time zone.

A cron monitor needs more than "when next": the last time a job *was* due (to catch up a missed run, and to say
whether an agent is late), from an injected clock. `Cron` answers both for five-field cron expressions, and says
each in plain words; cronsim (the evaluator healthchecks.io runs its users' crons with) does the reading, so
steps, ranges, names and the day-of-month/day-of-week rule mean what they mean in cron.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cronsim import CronSim, CronSimError

# Any fixed moment: cronsim parses an expression (and explains it) only together with a starting time.
_PARSE_AT = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Cron:
    """A five-field cron expression (minute hour day-of-month month day-of-week), evaluated in UTC."""

    expression: str
    explained: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.expression.split()) != 5:
            raise ValueError(f"cron expression {self.expression!r} needs five fields")
        try:
            parsed = CronSim(self.expression, _PARSE_AT)
        except CronSimError as exc:
            raise ValueError(f"cron expression {self.expression!r}: {exc}") from None
        object.__setattr__(self, "explained", parsed.explain())

    def next_after(self, moment: datetime) -> datetime:
        """The first time strictly after `moment` that matches."""
        start = _utc(moment).replace(second=0, microsecond=0)
        return self._first(CronSim(self.expression, start))

    def previous(self, moment: datetime) -> datetime:
        """The last time at or before `moment` that matches."""
        end = _utc(moment).replace(second=0, microsecond=0)
        # cronsim steps before it looks: from one second past `end`, a match at `end` itself is found.
        return self._first(CronSim(self.expression, end + timedelta(seconds=1), reverse=True))

    def _first(self, times: Iterator[datetime]) -> datetime:
        try:
            return next(times)
        except StopIteration:  # cronsim looks 50 years ahead (or back) before it gives up
            raise ValueError(f"cron expression {self.expression!r} never matches") from None


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("naive datetime: the jobs process works in aware UTC only")
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class AgentSchedule:
    """One agent of the agents strip: when it is due and how late it may be before it counts as late."""

    agent_id: str
    description: str
    cron: Cron | None = None
    every: timedelta | None = None
    grace: timedelta = timedelta(hours=1)
    # The writing agent runs on the content repository's CI; here it is only monitored, never started.
    runs_here: bool = True

    @property
    def schedule_text(self) -> str:
        if self.cron is not None:
            return self.cron.expression
        assert self.every is not None
        return f"every {int(self.every.total_seconds() // 60)} minutes"

    @property
    def schedule_in_words(self) -> str:
        """The schedule as a sentence, e.g. "At 08:00 every day (UTC)"."""
        if self.cron is not None:
            return f"{self.cron.explained} (UTC)"
        assert self.every is not None
        return f"Every {int(self.every.total_seconds() // 60)} minutes"

    def next_due(self, now: datetime, last_run_at: datetime | None) -> datetime:
        if self.cron is not None:
            return self.cron.next_after(now)
        assert self.every is not None
        return (last_run_at + self.every) if last_run_at else now

    def is_late(self, now: datetime, last_run_at: datetime | None) -> bool:
        """Overdue by more than the grace. An agent that never ran is "never run", not late, so a fresh
        install shows no red tiles."""
        if last_run_at is None:
            return False
        if self.cron is not None:
            due = self.cron.previous(now)
            return last_run_at < due and now - due > self.grace
        assert self.every is not None
        return now - last_run_at > self.every + self.grace


AGENTS: dict[str, AgentSchedule] = {
    schedule.agent_id: schedule
    for schedule in (
        AgentSchedule(
            "writing-daily",
            "Writing poll on the content repository's CI: catch up one article per calendar day",
            cron=Cron("0 9,18 * * *"),
            grace=timedelta(hours=2),
            runs_here=False,
        ),
        AgentSchedule(
            "ops-daily-pulse",
            "Daily pulse: health, stuck and Needs-you counts, staging, wallet; then the slot steward",
            cron=Cron("0 8 * * *"),
            grace=timedelta(hours=2),
        ),
        AgentSchedule(
            "ops-weekly-digest",
            "Weekly digest: done this week, blocked tickets, wallet, staging",
            cron=Cron("0 9 * * 1"),
            grace=timedelta(hours=6),
        ),
        AgentSchedule(
            "slot-steward",
            "Slot steward: wipe bays and drop claims of done or cancelled tickets (each pulse, mark_done, cancel)",
            cron=Cron("0 8 * * *"),
            grace=timedelta(hours=2),
            # Started by the pulse and by mark_done/cancel, never by the scheduler on its own.
            runs_here=False,
        ),
        AgentSchedule(
            "idle-reclaim",
            "Idle-slot reclaim: wipe slots idle more than 24 hours",
            cron=Cron("0 4 * * *"),
            grace=timedelta(hours=2),
        ),
        AgentSchedule(
            "archivist",
            "Archivist: move detail older than SVC_KEEP_DAYS into monthly gzip JSON-lines files under archive/",
            cron=Cron("30 3 * * *"),
            grace=timedelta(hours=2),
        ),
        AgentSchedule(
            "poller",
            "Poller: dispatch_requested for queued tickets whose webhook was missed",
            every=timedelta(minutes=5),
            grace=timedelta(minutes=10),
        ),
        AgentSchedule(
            "reconciler",
            "Reconciler: ask GitHub, GitLab and Linear for the events they failed to deliver",
            every=timedelta(minutes=10),
            grace=timedelta(minutes=20),
        ),
    )
}
AGENT_IDS: tuple[str, ...] = tuple(AGENTS)
