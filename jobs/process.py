"""The jobs process (`svc jobs`): scheduled agents, outbox delivery and a heartbeat, each on its own worker.

A bay wipe may take minutes (`SVC_BAY_WIPE_TIMEOUT`), and a pulse or a slot release can run several. So nothing
waits behind anything else: the heartbeat beats on its own thread; each scheduled agent has a worker; the outbox
is drained by one worker per kind of message (a lane), so a slot release wiping a bay holds back only the next
slot release, never a chat post or a tracker close. Wipes stay leased in the database (`domain/ops/steward.py`), so
two workers or two processes never wipe one bay. SIGTERM lets every worker finish the item in hand (one
scheduled run, one message), then the heartbeat stops and the process exits.

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from domain.clock import Clock
from domain.health import HEARTBEAT_SECONDS
from domain.ops import runs
from domain.ops.schedules import AGENTS, AgentSchedule
from domain.outage import DatabaseOutage
from jobs.delivery import OutboxDeliverer
from storage import job_state
from storage.db import connection, outage_cause, transaction

log = logging.getLogger("svc.jobs")

# A due time this recent counts as "on time"; older ones are catch-ups (run only within the grace).
ON_TIME = timedelta(minutes=5)
TICK_SECONDS = 20
DRAIN_SECONDS = 2
# Messages one drain of a lane takes on; a full batch means more are waiting, so the lane goes again at once.
DRAIN_BATCH = 50
# The main thread's longest wait between looks at the stop event and the workers.
MAIN_WAIT_SECONDS = 0.5

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


@dataclass(frozen=True)
class Worker:
    """One thread of the jobs process: `step` is called, then again after `every` seconds (at once when it
    says more work is waiting), until the process stops."""

    name: str
    step: Callable[[], bool]
    every: float


class JobsProcess:
    def __init__(
        self,
        clock: Clock,
        jobs: Mapping[str, Job],
        *,
        schedule_clock: Clock | None = None,
        deliverer: OutboxDeliverer | None = None,
        schedules: Mapping[str, AgentSchedule] = AGENTS,
        owner: str | None = None,
        lanes: Mapping[str, Iterable[str]] | None = None,
        outage: DatabaseOutage | None = None,
        periodic: Iterable[Worker] = (),
    ):
        self.clock = clock
        # The clock the schedules are read against: `clock` itself, unless a schedule is being rehearsed
        # (SVC_JOBS_CLOCK_OFFSET). Only "which due time is it?" reads it; claims, runs, the outbox and the
        # heartbeat keep real time, so a rehearsal never stalls delivery or ages the heartbeat.
        self.schedule_clock = schedule_clock or clock
        self.jobs = dict(jobs)
        self.deliverer = deliverer
        self.schedules = {agent_id: schedules[agent_id] for agent_id in self.jobs}
        self.owner = owner or f"jobs-{uuid.uuid4().hex[:12]}"
        # lane name -> the outbox kinds its worker delivers; by default one lane per kind.
        if lanes is None:
            lanes = {kind: (kind,) for kind in (deliverer.handlers if deliverer is not None else ())}
        self.lanes = {name: tuple(kinds) for name, kinds in lanes.items()}
        # One line when the database goes away and one when it is back, not a traceback per worker step.
        self.outage = outage or DatabaseOutage()
        # Work done every few seconds, each on its own worker (the lease reaper of the dispatch jobs).
        self.periodic = list(periodic)
        self.stopping = threading.Event()

    # -- one step at a time, testable with an injected clock ----------------------------------------------

    def due(self, now: datetime | None = None, *, agents: Iterable[str] | None = None) -> list[DueRun]:
        now = now or self.schedule_clock()
        wanted = list(self.schedules) if agents is None else [a for a in agents if a in self.schedules]
        with connection():
            last = job_state.last_slots(wanted)
        found = []
        for agent_id in wanted:
            run = due_slot(self.schedules[agent_id], last.get(agent_id), now)
            if run is not None:
                found.append(run)
        return found

    def claim(self, run: DueRun) -> bool:
        """Take `run` for this process; False when another process already ran (or is running) that slot."""
        now = self.clock()
        with connection(), transaction():
            return job_state.claim(run.agent_id, run.slot, owner=self.owner, at=now)

    def run_due(self, agents: Iterable[str] | None = None) -> list[str]:
        """Run every job due now (each claimed first), of `agents` or of all; return the agent ids that ran here."""
        ran = []
        for run in self.due(agents=agents):
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
            if outage_cause(exc) is not None:
                raise  # nor could its failure be recorded now: the worker logs the outage once
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

    def drain(self, kinds: Iterable[str] | None = None) -> int:
        """Deliver the due messages of `kinds` (default: every kind); stops between messages once stopping."""
        if self.deliverer is None:
            return 0
        return self.deliverer.drain(limit=DRAIN_BATCH, kinds=None if kinds is None else list(kinds), stop=self.stopping)

    def heartbeat(self) -> None:
        now = self.clock()
        with connection(), transaction():
            job_state.beat(owner=self.owner, at=now)
        # The beat is a write that changes a row, every few seconds: the proof the database takes writes again.
        self.outage.recovered(wrote=True)

    # -- the workers --------------------------------------------------------------------------------------

    def workers(self) -> list[Worker]:
        """One worker per scheduled agent, one per outbox lane and one per periodic step (the heartbeat has its own
        thread)."""
        found = [Worker(f"agent {agent_id}", self._agent_step(agent_id), TICK_SECONDS) for agent_id in self.schedules]
        found += [
            Worker(f"outbox {name}", lambda k=kinds: self.drain(k) >= DRAIN_BATCH, DRAIN_SECONDS)
            for name, kinds in self.lanes.items()
        ]
        return found + self.periodic

    def _agent_step(self, agent_id: str) -> Callable[[], bool]:
        def step() -> bool:
            self.run_due([agent_id])
            return False  # a scheduled agent is due at most once a tick

        return step

    def run_forever(self) -> None:
        """Run every worker until SIGTERM/SIGINT; each finishes the item in hand, then the process returns.

        Each worker is a thread that runs its step and then waits its interval on the stop event, so nothing holds
        another back and a stop wakes every waiting worker at once. The waits are `threading.Event` timeouts, on
        the monotonic clock: a step of the wall clock (NTP correcting a clock that ran ahead, a restored snapshot)
        moves none of them. When a job is due is the schedules' business (`due_slot`, against `schedule_clock`),
        not the waits'. The heartbeat is a thread too, and it goes on beating while the workers finish their work
        in hand after SIGTERM: a process finishing a wipe is alive. The main thread only takes the signals.
        """
        log.info(
            "jobs process started",
            extra={"owner": self.owner, "jobs": sorted(self.jobs), "outbox_lanes": sorted(self.lanes)},
        )
        beating_done = threading.Event()
        self._guarded("heartbeat", self.heartbeat)
        heart = threading.Thread(target=self._beat, args=(beating_done,), name="heartbeat", daemon=True)
        heart.start()
        threads, first_passes = [], []
        for worker in self.workers():
            first_pass = threading.Event()
            thread = threading.Thread(target=self._work, args=(worker, first_pass), name=worker.name, daemon=True)
            thread.start()
            threads.append(thread)
            first_passes.append(first_pass)
        ready = False
        # Short waits: the main thread stays free to take SIGTERM, and says once when every worker has had a pass.
        while not self.stopping.wait(timeout=MAIN_WAIT_SECONDS):
            if not ready and all(p.is_set() for p in first_passes):
                ready = True
                log.info("jobs process ready: first scheduling pass done", extra={"owner": self.owner})
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=MAIN_WAIT_SECONDS)
        beating_done.set()
        heart.join()
        log.info("jobs process stopped", extra={"owner": self.owner})

    def _work(self, worker: Worker, first_pass: threading.Event) -> None:
        while not self.stopping.is_set():
            more = self._guarded(worker.name, worker.step)
            first_pass.set()
            if not more:
                self.stopping.wait(timeout=worker.every)
        first_pass.set()

    def _beat(self, done: threading.Event) -> None:
        while not done.wait(timeout=HEARTBEAT_SECONDS):
            self._guarded("heartbeat", self.heartbeat)

    def _guarded(self, name: str, step: Callable[[], Any]) -> Any:
        try:
            return step()
        except Exception as exc:  # one failing step (database restarting, say) must not end its worker
            found = outage_cause(exc)
            if found is not None:
                self.outage.failed(*found)  # logged once per outage; the step runs again at its next tick
            else:
                log.exception("jobs step failed", extra={"step": name})
            return None

    def install_signal_handlers(self) -> None:
        def stop(signum, frame):
            log.info("stopping after the work in hand", extra={"signal": signum})
            self.stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
