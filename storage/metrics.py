"""The queries behind `GET /metrics` (`api/resources/metrics.py`): each one reads an index range, never the whole
of a growing table.

- the outbox backlog reads the pending rows only (the `(status, next_attempt_at, id)` index), so it costs what
  is pending, not what was ever sent;
- decisions and agent runs are only appended to (only the archivist deletes them, and only old ones, below every id
  a running process has counted), so they are counted by id range: the caller keeps the counts up to an id it knows
  is settled and asks only for the rows after it (a primary key range).
"""

from __future__ import annotations

from datetime import UTC, datetime

from peewee import fn

from storage.models import AgentRun, DispatchJob, OutboxMessage, RouterDecision, stored_time
from storage.outbox import PENDING


def outbox_pending_by_kind() -> dict[str, tuple[int, datetime]]:
    """kind -> (pending messages, when the oldest of them was queued)."""
    rows = (
        OutboxMessage.select(OutboxMessage.kind, fn.COUNT(OutboxMessage.id), fn.MIN(OutboxMessage.created_at))
        .where(OutboxMessage.status == PENDING)
        .group_by(OutboxMessage.kind)
        .tuples()
    )
    return {kind: (count, _aware(oldest)) for kind, count, oldest in rows}


def jobs_in_states(states: tuple[str, ...]) -> dict[str, int]:
    """state -> how many dispatch jobs are in it, for the states given (the `(state, id)` index)."""
    rows = (
        DispatchJob.select(DispatchJob.state, fn.COUNT(DispatchJob.id))
        .where(DispatchJob.state.in_(states))
        .group_by(DispatchJob.state)
        .tuples()
    )
    return dict(rows)


def max_decision_id() -> int:
    return RouterDecision.select(fn.MAX(RouterDecision.id)).scalar() or 0


def decision_counts(after_id: int, up_to_id: int | None = None) -> dict[tuple[str, ...], int]:
    """(outcome,) -> decisions with `after_id < id <= up_to_id` (no upper bound when None)."""
    where = RouterDecision.id > after_id
    if up_to_id is not None:
        where &= RouterDecision.id <= up_to_id
    rows = (
        RouterDecision.select(RouterDecision.outcome, fn.COUNT(RouterDecision.id))
        .where(where)
        .group_by(RouterDecision.outcome)
        .tuples()
    )
    return {(outcome,): count for outcome, count in rows}


def max_run_id() -> int:
    return AgentRun.select(fn.MAX(AgentRun.id)).scalar() or 0


def run_counts(after_id: int, up_to_id: int | None = None) -> dict[tuple[str, ...], int]:
    """(agent_id, "ok" | "failed") -> agent runs with `after_id < id <= up_to_id` (no upper bound when None)."""
    where = AgentRun.id > after_id
    if up_to_id is not None:
        where &= AgentRun.id <= up_to_id
    rows = (
        AgentRun.select(AgentRun.agent_id, AgentRun.ok, fn.COUNT(AgentRun.id))
        .where(where)
        .group_by(AgentRun.agent_id, AgentRun.ok)
        .tuples()
    )
    counts: dict[tuple[str, ...], int] = {}
    for agent_id, ok, count in rows:
        key = (agent_id, "ok" if ok else "failed")
        counts[key] = counts.get(key, 0) + count
    return counts


def _aware(value) -> datetime:
    if isinstance(value, str):  # SQLite hands aggregates back as text
        value = stored_time(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value
