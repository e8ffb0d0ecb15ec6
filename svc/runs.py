"""Run history: every agent run recorded, newest first, keyset-paged."""

from __future__ import annotations

from storage import runs
from storage.models import AgentRun


def history(agent_id: str | None, *, limit: int, cursor: str | None) -> tuple[list[AgentRun], str | None]:
    """One page of runs (of one agent when `agent_id` is given), newest first, and the next page's cursor."""
    return runs.page(agent_id=agent_id, limit=limit, cursor=cursor)
