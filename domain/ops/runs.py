"""Agent runs, the domain's side of `storage/runs.py`: recording one (what every job leaves on the agents strip,
however it was started) and reading the history, newest first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storage import runs
from storage.models import AgentRun


@dataclass(frozen=True)
class Trigger:
    """Why a job runs now: on its schedule (possibly late, catching up a missed time), or on request."""

    by: str  # "schedule", "api", "runner", "mark_done", "cancel", "pulse", "command" (svc reconcile)
    scheduled_for: datetime | None = None
    late: bool = False
    actor: str | None = None  # who asked, when a person or the ops runner did

    def details(self) -> dict[str, Any]:
        out: dict[str, Any] = {"trigger": self.by}
        if self.actor is not None:
            out["actor"] = self.actor
        if self.scheduled_for is not None:
            out["scheduled_for"] = self.scheduled_for.isoformat().replace("+00:00", "Z")
            out["late"] = self.late
        return out


def record(
    agent_id: str,
    *,
    trigger: Trigger,
    started_at: datetime,
    finished_at: datetime,
    status: str,
    ok: bool,
    summary: str,
    details: dict[str, Any] | None = None,
) -> AgentRun:
    """Write one run; call inside the job's transaction so the run and its effects commit together."""
    merged = {**trigger.details(), "duration_ms": round((finished_at - started_at).total_seconds() * 1000, 1)}
    merged.update(details or {})
    return runs.record(
        agent_id,
        status=status,
        ok=ok,
        started_at=started_at,
        finished_at=finished_at,
        summary=summary,
        details=merged,
    )


def history(agent_id: str | None, *, limit: int, cursor: str | None) -> tuple[list[AgentRun], str | None]:
    """One page of runs (of one agent when `agent_id` is given), newest first, and the next page's cursor."""
    return runs.page(agent_id=agent_id, limit=limit, cursor=cursor)


def recent(agent_ids: list[str], count: int) -> dict[str, list[AgentRun]]:
    """Each agent's newest `count` runs, newest first: the history the web board shows beside each agent."""
    return {agent_id: runs.latest(agent_id, count) for agent_id in agent_ids}
