"""What the jobs process runs: the scheduled agents and the outbox handlers, built from the configuration."""

from __future__ import annotations

from domain.board import SLOT_RELEASE_KIND, TRACKER_CLOSE_KIND
from domain.chat import KIND as CHAT_KIND
from domain.clock import Clock
from domain.config import Config
from domain.dispatch.forge import forge_adapters
from domain.dispatch.jobs import FORGE_WRITE_KIND, REAP_BATCH
from domain.ops.agents import EXTERNAL_CRON_AGENTS, OpsAgents
from domain.ops.archivist import ARCHIVIST_AGENT, Archivist
from domain.ops.digest import DIGEST_AGENT
from domain.ops.pulse import PULSE_AGENT
from domain.ops.reconciler import AGENT_ID as RECONCILER_AGENT_ID
from domain.ops.reconciler import Reconciler
from domain.ops.steward import RECLAIM_AGENT
from domain.outage import DatabaseOutage
from domain.router import scorecard
from domain.router.board_events import ROUTE_KIND
from domain.router.poller import AGENT_ID as POLLER_AGENT_ID
from domain.router.poller import Poller
from domain.router.reconciliation import TrackerCatchUp
from domain.services import DomainServices, build_services
from integrations.github import GitHub
from integrations.gitlab import GitLab
from integrations.linear import LinearTracker
from jobs.chat_delivery import ChatDelivery
from jobs.delivery import Handler, OutboxDeliverer, Recorder
from jobs.forge_writes import ForgeWrite
from jobs.handlers import RouteQueuedEvent, SlotRelease, TrackerClose
from jobs.process import Job, JobsProcess, Worker
from storage.db import connection

# How often the lease reaper looks for running jobs whose lease ran out: a job is back in the queue (or failed)
# within this many seconds of its lease's end, well within the contract's 10.
REAP_SECONDS = 2.0
# How often the scorecard's settled days are counted: a day settles once a day, and an import drops the days it
# touched; a read scans what is not counted yet, so a minute late costs a little, never a wrong number.
SCORECARD_SECONDS = 60.0


def scheduled_jobs(config: Config, clock: Clock, *, services: DomainServices | None = None) -> dict[str, Job]:
    """agent id -> the job the scheduler starts when that agent is due: the ops agents, the archivist, the poller
    and the reconciler. `services`: the process's (built from the configuration when not given)."""
    services = services or build_services(config, clock)
    return {
        **ops_jobs(config, services.ops),
        ARCHIVIST_AGENT: archivist(config, clock),
        POLLER_AGENT_ID: Poller(services.router, config, clock),
        RECONCILER_AGENT_ID: reconciler(config, clock, services=services),
    }


def archivist(config: Config, clock: Clock) -> Archivist:
    """The archivist, with the scorecard's settled days counted before it moves decisions out."""
    return Archivist(config, clock, keep_scorecard=scorecard.keep_through, scorecard_kept_until=scorecard.kept_until)


def reconciler(config: Config, clock: Clock, *, services: DomainServices | None = None) -> Reconciler:
    """The reconciler with the senders' clients the configuration names (none where it gives no token), routing
    the tracker's missed state changes through the process's router (`services`; built from the configuration when
    not given)."""
    services = services or build_services(config, clock)
    github = GitHub(config.github_api_url, config.github_api_token) if config.github_api_token else None
    gitlab = GitLab(config.gitlab_api_url, config.gitlab_api_token) if config.gitlab_api_token else None
    tracker = LinearTracker(config.tracker_api_url, config.tracker_api_key) if config.tracker_api_key else None
    catch_up = TrackerCatchUp(services.router.receive, clock)
    return Reconciler(config, clock, github=github, gitlab=gitlab, tracker=tracker, catch_up=catch_up)


def ops_jobs(config: Config, ops: OpsAgents) -> dict[str, Job]:
    """agent id -> job, for the ops agents `svc jobs` starts on their UTC schedules."""
    jobs: dict[str, Job] = {
        PULSE_AGENT: lambda trigger: ops.pulse(trigger),
        DIGEST_AGENT: ops.weekly_digest,
        RECLAIM_AGENT: ops.idle_reclaim,
    }
    if config.ops_scheduler == "external":
        # A CI cron starts these through the ops endpoints instead (SVC_OPS_SCHEDULER=external).
        jobs = {agent: job for agent, job in jobs.items() if agent not in EXTERNAL_CRON_AGENTS}
    return jobs


def outbox_handlers(
    config: Config, clock: Clock, *, services: DomainServices | None = None
) -> tuple[dict[str, Handler], dict[str, Recorder]]:
    """outbox kind -> the handler that delivers it, and the recorders that note outcomes on timelines. `services`:
    the process's, the forge adapters among them, built once (from the configuration when not given)."""
    services = services or build_services(config, clock)
    release, close = SlotRelease(services.ops.steward, clock), TrackerClose(config, clock)
    forge = ForgeWrite(services.forge_writes, services.forges)
    handlers: dict[str, Handler] = {
        CHAT_KIND: ChatDelivery(config, clock),
        # The board's own events, queued by the stage listener, are routed here.
        ROUTE_KIND: RouteQueuedEvent(services.router),
        SLOT_RELEASE_KIND: release,
        TRACKER_CLOSE_KIND: close,
        # A job's accepted output with changes: its draft pull request and comment (`jobs/forge_writes.py`).
        FORGE_WRITE_KIND: forge,
    }
    recorders = {SLOT_RELEASE_KIND: release.record, TRACKER_CLOSE_KIND: close.record, FORGE_WRITE_KIND: forge.record}
    return handlers, recorders


def lease_reaper(config: Config, clock: Clock, *, services: DomainServices | None = None) -> Worker:
    """The worker that puts back (or fails) the dispatch jobs whose lease ran out (`Dispatch.reap`)."""
    dispatch = (services or build_services(config, clock)).dispatch

    def step() -> bool:
        with connection():
            return dispatch.reap() >= REAP_BATCH  # a full batch: more may be waiting

    return Worker("lease reaper", step, REAP_SECONDS)


def scorecard_counter(clock: Clock) -> Worker:
    """The worker that counts the scorecard's settled days once and keeps them (`scorecard.keep_settled_days`), so
    that no read has to."""

    def step() -> bool:
        with connection():
            return scorecard.keep_settled_days(now=clock())

    return Worker("scorecard counter", step, SCORECARD_SECONDS)


def build(config: Config, clock: Clock, *, schedule_clock: Clock | None = None) -> JobsProcess:
    """The jobs process on `clock` (real time); `schedule_clock`, when given, is what the schedules are read
    against (a rehearsal, SVC_JOBS_CLOCK_OFFSET) and nothing else."""
    # One view of a database outage for the process: its workers feed it, the pulse's health checks read it.
    outage = DatabaseOutage()
    # The services on one board, as the API builds them; the forges, one adapter each, built once for the process.
    services = build_services(config, clock, forges=forge_adapters(config), outage=outage)
    handlers, recorders = outbox_handlers(config, clock, services=services)
    deliverer = OutboxDeliverer(handlers, clock, recorders=recorders)
    jobs = scheduled_jobs(config, clock, services=services)
    return JobsProcess(
        clock,
        jobs,
        schedule_clock=schedule_clock,
        deliverer=deliverer,
        outage=outage,
        periodic=[lease_reaper(config, clock, services=services), scorecard_counter(clock)],
    )
