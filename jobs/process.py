"""The jobs process (`svc jobs`): scheduled agents, outbox delivery and a heartbeat, in one loop.

Scheduled jobs are claimed with a compare-and-swap on `job_state.last_slot` (the due time they run for),
so two jobs processes on one database never run the same scheduled job twice. A job that missed its time
while the process was down runs once when it comes back, if it is still within the job's grace and the
job has run before (a fresh database never starts with a burst of "missed" runs); that run is marked late.
"""

from __future__ import annotations

import logging
import signal
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import schedule

from jobs import runs
from jobs.delivery import OutboxDeliverer
from jobs.schedules import AGENTS, AgentSchedule
from storage import job_state
from storage.db import connection, transaction
from svc.clock import Clock

log = logging.getLogger("svc.jobs")

# A due time this recent counts as "on time"; older ones are catch-ups (run only within the grace).
ON_TIME = timedelta(minutes=5)
TICK_SECONDS = 20
DRAIN_SECONDS = 2
HEARTBEAT_SECONDS = 15

Job = Callable[[runs.Trigger], Any]


@dataclass(frozen=True)
class DueRun:
    agent_id: str
    slot: datetime
    late: bool


def due_slot(plan: AgentSchedule, last_slot: datetime | None, now: datetime) -> DueRun | None:
    """Whether `plan` is due at `now`, given the last due time it ran for. Pure, so it is tested by clock."""
    if plan.cron is not None:
        slot = plan.cron.previous(now)
        if last_slot is not None and last_slot >= slot:
            return None
        delay = now - slot
        if delay <= ON_TIME:
            return DueRun(plan.agent_id, slot, late=False)
        if last_slot is None or delay > plan.grace:
            return None
        return DueRun(plan.agent_id, slot, late=True)
    assert plan.every is not None
    period = int(plan.every.total_seconds())
    slot = datetime.fromtimestamp(int(now.timestamp()) // period * period, UTC)
    if last_slot is not None and last_slot >= slot:
        return None
    return DueRun(plan.agent_id, slot, late=False)


class JobsProcess:
    def __init__(
        self,
        clock: Clock,
        jobs: Mapping[str, Job],
        *,
        deliverer: OutboxDeliverer | None = None,
        schedules: Mapping[str, AgentSchedule] = AGENTS,
        owner: str | None = None,
    ):
        self.clock = clock
        self.jobs = dict(jobs)
        self.deliverer = deliverer
        self.schedules = {agent_id: schedules[agent_id] for agent_id in self.jobs}
        self.owner = owner or f"jobs-{uuid.uuid4().hex[:12]}"
        self.stopping = threading.Event()

    # -- one tick, testable with an injected clock --------------------------------------------------------

    def due(self, now: datetime | None = None) -> list[DueRun]:
        now = now or self.clock()
        with connection():
            last = job_state.last_slots(list(self.schedules))
        found = []
        for agent_id, plan in self.schedules.items():
            run = due_slot(plan, last.get(agent_id), now)
            if run is not None:
                found.append(run)
        return found

    def claim(self, run: DueRun) -> bool:
        """Take `run` for this process; False when another process already ran (or is running) that slot."""
        now = self.clock()
        with connection(), transaction():
            return job_state.claim(run.agent_id, run.slot, owner=self.owner, at=now)

    def run_due(self) -> list[str]:
        """Run every job due now (each claimed first); return the agent ids that ran here."""
        ran = []
        for run in self.due():
            if self.stopping.is_set():
                break
            if not self.claim(run):
                log.info("scheduled run taken by another process", extra={"agent_id": run.agent_id})
                continue
            log.info(
                "scheduled run starting",
                extra={"agent_id": run.agent_id, "scheduled_for": run.slot.isoformat(), "late": run.late},
            )
            self._run(run)
            ran.append(run.agent_id)
        return ran

    def _run(self, run: DueRun) -> None:
        trigger = runs.Trigger("schedule", scheduled_for=run.slot, late=run.late)
        started = self.clock()
        try:
            with connection():
                self.jobs[run.agent_id](trigger)
        except Exception as exc:
            log.exception("scheduled job failed", extra={"agent_id": run.agent_id})
            with connection(), transaction():
                runs.record(
                    run.agent_id,
                    trigger=trigger,
                    started_at=started,
                    finished_at=self.clock(),
                    status="FAILED",
                    ok=False,
                    summary=f"{type(exc).__name__}: {exc}"[:500],
                )
        finally:
            with connection(), transaction():
                job_state.finished(run.agent_id, at=self.clock())

    def drain(self) -> int:
        return self.deliverer.drain() if self.deliverer is not None else 0

    def heartbeat(self) -> None:
        now = self.clock()
        with connection(), transaction():
            job_state.beat(owner=self.owner, at=now)

    # -- the loop -----------------------------------------------------------------------------------------

    def run_forever(self) -> None:
        """Loop until SIGTERM/SIGINT; the job in hand is finished before the process exits."""
        loop = schedule.Scheduler()
        loop.every(TICK_SECONDS).seconds.do(self._guarded, self.run_due)
        loop.every(DRAIN_SECONDS).seconds.do(self._guarded, self.drain)
        loop.every(HEARTBEAT_SECONDS).seconds.do(self._guarded, self.heartbeat)
        log.info("jobs process started", extra={"owner": self.owner, "jobs": sorted(self.jobs)})
        self._guarded(self.heartbeat)
        self._guarded(self.run_due)
        self._guarded(self.drain)
        log.info("jobs process ready: first scheduling pass done", extra={"owner": self.owner})
        while not self.stopping.is_set():
            loop.run_pending()
            idle = loop.idle_seconds
            self.stopping.wait(timeout=min(max(idle if idle is not None else 1.0, 0.05), 1.0))
        log.info("jobs process stopped", extra={"owner": self.owner})

    def _guarded(self, step: Callable[[], Any]) -> None:
        if self.stopping.is_set():
            return
        try:
            step()
        except Exception:  # one failing step (database restarting, say) must not end the process
            log.exception("jobs step failed", extra={"step": getattr(step, "__name__", str(step))})

    def install_signal_handlers(self) -> None:
        def stop(signum, frame):
            log.info("stopping after the job in hand", extra={"signal": signum})
            self.stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)


def heartbeat_age(now: datetime) -> float | None:
    """Seconds since any jobs process last beat, or None if none ever did."""
    last = job_state.last_beat()
    return None if last is None else (now - last).total_seconds()
