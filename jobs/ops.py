"""The ops agents as one unit: what the jobs process schedules, what the outbox hands over, what the ops
endpoints call, and the snapshot for tools.

Each agent is a small unit that records its own run and returns what it found; the jobs process, the ops
endpoints and the outbox handlers only choose the `Trigger`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from integrations.staging import StagingResult
from jobs import agents_strip, tracker_close
from jobs.delivery import Attempt, Handler, Outcome, Recorder
from jobs.digest import DIGEST_AGENT, DigestReport, WeeklyDigest
from jobs.process import Job
from jobs.pulse import (
    PULSE_AGENT,
    DailyPulse,
    PulseReport,
    StagingCheck,
    count_stuck,
    hidden_from_needs_you,
    last_staging,
    service_health,
    staging_check_for,
)
from jobs.runs import Trigger
from jobs.steward import RECLAIM_AGENT, BayReport, BayWipes, IdleReclaim, SlotSteward, Wiper
from machines.stages import STAGES
from storage import slots, tickets, timeline, wallet
from storage.db import connection
from storage.models import Ticket, Wallet
from svc import automation
from svc.automation import AutomationState
from svc.board import Board, SlotView
from svc.clock import Clock
from svc.config import Config

SLOT_RELEASE_KIND = "slot_release"
# A wipe failing at mark_done/cancel is retried by the outbox a few times (5 s, 15 s, 60 s later), then left
# to the slot steward of the next pulse, which finds the claim still there.
SLOT_RELEASE_TRIES = 4
# The agents a CI cron starts instead of `svc jobs` when SVC_OPS_SCHEDULER=external.
EXTERNAL_CRON_AGENTS = (PULSE_AGENT, DIGEST_AGENT, RECLAIM_AGENT)


@dataclass(frozen=True)
class Snapshot:
    generated_at: datetime
    health: dict[str, dict[str, Any]]
    by_stage: dict[str, int]
    needs_you_count: int
    stuck: int
    needs_you: list[Ticket]
    agents: list[agents_strip.AgentStatus]
    automation: AutomationState
    slots: list[SlotView]
    wallet: Wallet
    staging_configured: bool
    staging_url: str | None
    staging_last_check: StagingResult | None

    @property
    def blocked(self) -> int:
        return self.by_stage.get("blocked", 0)


class OpsAgents:
    def __init__(
        self,
        config: Config,
        clock: Clock,
        *,
        board: Board | None = None,
        wiper: Wiper | None = None,
        staging_check: StagingCheck | None = None,
    ):
        self.config = config
        self.clock = clock
        self.board = board or Board(config, clock)
        check = staging_check or staging_check_for(config)
        wipes = BayWipes(config, clock, wiper=wiper)
        self.steward = SlotSteward(wipes, clock)
        self.reclaim = IdleReclaim(wipes, clock)
        self.pulse_agent = DailyPulse(config, clock, steward=self.steward, staging_check=check)
        self.digest_agent = WeeklyDigest(clock, staging_check=check)

    # -- the agents ---------------------------------------------------------------------------------------

    def pulse(self, trigger: Trigger, *, post_to_chat: str | None = None) -> PulseReport:
        return self.pulse_agent.run(trigger, post_to_chat=post_to_chat)

    def weekly_digest(self, trigger: Trigger) -> DigestReport:
        return self.digest_agent.run(trigger)

    def slot_steward(self, trigger: Trigger, *, ticket: str | None = None) -> BayReport:
        return self.steward.run(trigger, ticket=ticket)

    def idle_reclaim(self, trigger: Trigger) -> BayReport:
        return self.reclaim.run(trigger)

    # -- wiring into the jobs process ---------------------------------------------------------------------

    def scheduled_jobs(self) -> dict[str, Job]:
        """agent id -> job, for the agents `svc jobs` starts on their UTC schedules."""
        jobs: dict[str, Job] = {
            PULSE_AGENT: lambda trigger: self.pulse(trigger),
            DIGEST_AGENT: self.weekly_digest,
            RECLAIM_AGENT: self.idle_reclaim,
        }
        if self.config.ops_scheduler == "external":
            return {k: v for k, v in jobs.items() if k not in EXTERNAL_CRON_AGENTS}
        return jobs

    def outbox_handlers(self) -> tuple[dict[str, Handler], dict[str, Recorder]]:
        handlers = {SLOT_RELEASE_KIND: self._release_slots, tracker_close.KIND: tracker_close.handler(self.config)}
        recorders = {SLOT_RELEASE_KIND: self._record_release, tracker_close.KIND: tracker_close.recorder(self.clock)}
        return handlers, recorders

    def _release_slots(self, attempt: Attempt) -> Outcome:
        """`slot_release`, queued by mark_done/cancel: the slot steward, for that ticket."""
        key = attempt.payload["ticket"]
        report = self.steward.run(Trigger(attempt.payload.get("reason") or "slot_release"), ticket=key)
        if report.failed:
            detail = "; ".join(f"wipe of {o.slot} failed: {o.detail}" for o in report.failed)
            if attempt.attempts + 1 < SLOT_RELEASE_TRIES:
                return Outcome.retry(detail)
            return Outcome.give_up(f"{detail}; the slot steward of the next pulse tries again")
        released = [o.slot for o in report.released]
        return Outcome.sent(f"released {', '.join(released) or 'nothing'}", released=released)

    def _record_release(self, attempt: Attempt, outcome: Outcome) -> None:
        # The steward writes its own timeline entries; only a release that could not run at all is noted here.
        if outcome.status == "sent" or not tickets.exists(attempt.payload["ticket"]):
            return
        if outcome.detail.startswith("handler error"):
            timeline.append(
                attempt.payload["ticket"],
                kind="slot_release_failed",
                summary=f"slot release could not run ({outcome.detail}); the slot steward of the next pulse tries "
                "again",
                at=self.clock(),
                data={"detail": outcome.detail},
            )

    # -- the snapshot -------------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Everything a tool wants to know at once, from the database only (the staging result is the last check's)."""
        with connection():
            now = self.clock()
            counts = dict.fromkeys(STAGES, 0) | tickets.counts_by_stage()
            return Snapshot(
                generated_at=now,
                health=service_health(now),
                by_stage=counts,
                needs_you_count=tickets.count_needs_you(exclude_keys=hidden_from_needs_you()),
                stuck=count_stuck(self.config, now),
                needs_you=self.board.needs_you_list(limit=50),
                agents=agents_strip.strip(now),
                automation=automation.state(),
                slots=[SlotView(slot, claim) for slot, claim in slots.all_with_claims()],
                wallet=wallet.get(),
                staging_configured=self.config.staging_url is not None,
                staging_url=self.config.staging_url,
                staging_last_check=last_staging(),
            )
