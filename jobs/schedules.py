"""When each agent is due, in UTC whatever the host's time zone.

The `schedule` library drives the jobs loop, but it reads the host's clock and can only say "next run";
a cron monitor needs more: the last time a job *was* due (to catch up a missed run, and to say whether an
agent is late) from an injected clock. `Cron` answers both for the five-field cron expressions of the seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day", 1, 31), ("month", 1, 12), ("weekday", 0, 6))


def _parse_field(text: str, low: int, high: int, name: str) -> frozenset[int]:
    top = 7 if name == "weekday" else high  # cron writes Sunday as 0 or 7
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if body == "*":
            start, end = low, high
        elif "-" in body:
            start, end = (int(v) for v in body.split("-", 1))
        else:
            start = end = int(body)
        if step < 1 or start < low or end > top or start > end:
            raise ValueError(f"cron {name} field {text!r} is out of range {low}-{top}")
        values.update(range(start, end + 1, step))
    return frozenset(v % 7 for v in values) if name == "weekday" else frozenset(values)


@dataclass(frozen=True)
class Cron:
    """A five-field cron expression (minute hour day-of-month month day-of-week), evaluated in UTC."""

    expression: str

    def __post_init__(self) -> None:
        parts = self.expression.split()
        if len(parts) != 5:
            raise ValueError(f"cron expression {self.expression!r} needs five fields")
        parsed = [_parse_field(text, low, high, name) for text, (name, low, high) in zip(parts, _FIELDS, strict=True)]
        object.__setattr__(self, "_sets", parsed)
        object.__setattr__(self, "_day_any", parts[2] == "*")
        object.__setattr__(self, "_weekday_any", parts[4] == "*")

    def _day_matches(self, day: datetime) -> bool:
        _, _, days, months, weekdays = self._sets
        if day.month not in months:
            return False
        in_days = day.day in days
        in_weekdays = (day.isoweekday() % 7) in weekdays
        if self._day_any and self._weekday_any:
            return True
        if self._day_any:
            return in_weekdays
        if self._weekday_any:
            return in_days
        return in_days or in_weekdays  # cron's rule when both are restricted

    def next_after(self, moment: datetime) -> datetime:
        """The first time strictly after `moment` that matches."""
        minutes, hours = sorted(self._sets[0]), sorted(self._sets[1])
        start = _utc(moment).replace(second=0, microsecond=0) + timedelta(minutes=1)
        day = start.replace(hour=0, minute=0)
        for offset in range(0, 366 * 5):
            candidate_day = day + timedelta(days=offset)
            if not self._day_matches(candidate_day):
                continue
            for hour in hours:
                for minute in minutes:
                    when = candidate_day.replace(hour=hour, minute=minute)
                    if when >= start:
                        return when
        raise ValueError(f"cron expression {self.expression!r} never matches")

    def previous(self, moment: datetime) -> datetime:
        """The last time at or before `moment` that matches."""
        minutes, hours = sorted(self._sets[0], reverse=True), sorted(self._sets[1], reverse=True)
        end = _utc(moment).replace(second=0, microsecond=0)
        day = end.replace(hour=0, minute=0)
        for offset in range(0, 366 * 5):
            candidate_day = day - timedelta(days=offset)
            if not self._day_matches(candidate_day):
                continue
            for hour in hours:
                for minute in minutes:
                    when = candidate_day.replace(hour=hour, minute=minute)
                    if when <= end:
                        return when
        raise ValueError(f"cron expression {self.expression!r} never matches")


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
            "poller",
            "Poller: dispatch_requested for queued tickets whose webhook was missed",
            every=timedelta(minutes=5),
            grace=timedelta(minutes=10),
        ),
    )
}
AGENT_IDS: tuple[str, ...] = tuple(AGENTS)
