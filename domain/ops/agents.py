"""The ops agents as one unit: the pulse, the weekly digest, the slot steward and idle reclaim, which the jobs
process schedules and the ops endpoints run now; and the snapshot for tools.

Each agent is a small unit that records its own run and returns what it found; the jobs process, the ops
endpoints and the outbox handlers only choose the `Trigger`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain import automation
from domain.automation import AutomationState
from domain.board import Board, SlotView
from domain.clock import Clock
from domain.config import Config
from domain.health import health
from domain.ops import agents_strip
from domain.ops.digest import DIGEST_AGENT, DigestReport, WeeklyDigest
from domain.ops.pulse import (
    PULSE_AGENT,
    DailyPulse,
    PulseReport,
    StagingCheck,
    count_stuck,
    hidden_from_needs_you,
    last_staging,
    staging_check_for,
)
from domain.ops.runs import Trigger
from domain.ops.steward import RECLAIM_AGENT, BayReport, BayWipes, IdleReclaim, SlotSteward, Wiper
from domain.outage import DatabaseOutage
from integrations.staging import StagingResult
from machines.stages import STAGES
from storage import slots, tickets, wallet
from storage.db import connection
from storage.models import Ticket, Wallet

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
        outage: DatabaseOutage | None = None,
    ):
        """`outage` is what the process running the agents knows of a database outage, which the health checks of
        the pulse and the snapshot read as `/healthz` does (a fresh one by default)."""
        self.config = config
        self.clock = clock
        self.board = board or Board(config, clock)
        self.outage = outage or DatabaseOutage()
        check = staging_check or staging_check_for(config)
        wipes = BayWipes(config, clock, wiper=wiper)
        self.steward = SlotSteward(wipes, clock)
        self.reclaim = IdleReclaim(wipes, clock)
        self.pulse_agent = DailyPulse(config, clock, steward=self.steward, staging_check=check, outage=self.outage)
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

    # -- the snapshot -------------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Everything a tool wants to know at once, from the database only (the staging result is the last check's);
        its health is `/healthz`'s checks."""
        with connection():
            now = self.clock()
            counts = dict.fromkeys(STAGES, 0) | tickets.counts_by_stage()
            return Snapshot(
                generated_at=now,
                health=health(self.config, now, self.outage).checks,
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
