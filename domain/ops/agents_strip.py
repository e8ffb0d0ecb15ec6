"""The agents strip (served by `api/resources/agents_strip.py`): each agent's last run, schedule, next due time
and whether it is late — as a cron monitor shows it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from domain.ops.schedules import AGENTS, AgentSchedule
from storage import runs
from storage.models import AgentRun


@dataclass(frozen=True)
class AgentStatus:
    schedule: AgentSchedule
    last_run: AgentRun | None
    next_due_at: datetime
    late: bool


def strip(now: datetime) -> list[AgentStatus]:
    """One row per agent, in the strip's order."""
    rows = []
    for agent_id, plan in AGENTS.items():
        latest = runs.latest(agent_id, 1)
        last = latest[0] if latest else None
        last_at = last.started_at if last else None
        rows.append(AgentStatus(plan, last, plan.next_due(now, last_at), plan.is_late(now, last_at)))
    return rows
