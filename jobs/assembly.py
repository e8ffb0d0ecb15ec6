"""What the jobs process runs: the scheduled agents and the outbox handlers, built from the configuration."""

from __future__ import annotations

from jobs.chat import ChatDelivery
from jobs.delivery import Handler, OutboxDeliverer, Recorder
from jobs.ops import OpsAgents
from jobs.process import Job, JobsProcess
from jobs.router.board_events import ROUTE_KIND, RouteQueuedEvent
from jobs.router.poller import AGENT_ID as POLLER_AGENT_ID
from jobs.router.poller import Poller
from jobs.router.shadow import ShadowRouter
from svc.clock import Clock
from svc.config import Config


def scheduled_jobs(config: Config, clock: Clock) -> dict[str, Job]:
    """agent id -> the job the scheduler starts when that agent is due."""
    jobs: dict[str, Job] = {}
    jobs.update(OpsAgents(config, clock).scheduled_jobs())
    jobs[POLLER_AGENT_ID] = Poller(ShadowRouter(config, clock), config, clock)
    return jobs


def outbox_handlers(config: Config, clock: Clock) -> tuple[dict[str, Handler], dict[str, Recorder]]:
    """outbox kind -> the handler that delivers it, and the recorders that note outcomes on timelines."""
    ops_handlers, ops_recorders = OpsAgents(config, clock).outbox_handlers()
    # The board's own events, queued by the stage listener, are routed here (see jobs/router/board_events.py).
    handlers: dict[str, Handler] = {
        "chat": ChatDelivery(config, clock),
        ROUTE_KIND: RouteQueuedEvent(ShadowRouter(config, clock)),
        **ops_handlers,
    }
    return handlers, dict(ops_recorders)


def build(config: Config, clock: Clock, *, schedule_clock: Clock | None = None) -> JobsProcess:
    """The jobs process on `clock` (real time); `schedule_clock`, when given, is what the schedules are read
    against (a rehearsal, SVC_JOBS_CLOCK_OFFSET) and nothing else."""
    handlers, recorders = outbox_handlers(config, clock)
    deliverer = OutboxDeliverer(handlers, clock, recorders=recorders)
    return JobsProcess(clock, scheduled_jobs(config, clock), schedule_clock=schedule_clock, deliverer=deliverer)
