"""Agent run rows, the storage side of `domain/ops/runs.py`: the run history behind the agents strip."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from storage import statements
from storage.models import AgentRun
from storage.paging import decode_cursor, page_of


def record(
    agent_id: str,
    *,
    status: str,
    ok: bool,
    started_at: datetime,
    finished_at: datetime | None,
    summary: str = "",
    details: dict[str, Any] | None = None,
) -> AgentRun:
    return statements.insert(
        AgentRun,
        {
            "agent_id": agent_id,
            "status": status,
            "ok": ok,
            "started_at": started_at,
            "finished_at": finished_at,
            "summary": summary,
            "details": details,
        },
    )


def page(*, agent_id: str | None, limit: int, cursor: str | None = None) -> tuple[list[AgentRun], str | None]:
    query = AgentRun.select()
    if agent_id is not None:
        query = query.where(AgentRun.agent_id == agent_id)
    if cursor:
        (before,) = decode_cursor(cursor, int)
        query = query.where(AgentRun.id < before)
    rows = list(query.order_by(AgentRun.id.desc()).limit(limit + 1))
    return page_of(rows, limit, lambda r: [r.id])


def latest(agent_id: str, count: int = 1) -> list[AgentRun]:
    """The agent's newest `count` runs, newest first (the agents strip asks for every agent on every view)."""
    return statements.rows(
        AgentRun, ("latest",), lambda p: f'WHERE "agent_id" = {p} ORDER BY "id" DESC LIMIT {p}', [agent_id, count]
    )
