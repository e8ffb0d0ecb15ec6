"""Emptying a database and counting what is in it: what `svc demo` needs before and after it fills one."""

from __future__ import annotations

from storage import models
from storage.db import transaction

# Children before parents, so foreign keys never stop a delete. The schema version and the wallet's one
# row stay: the schema is unchanged, and the wallet row is reset rather than removed. People's accounts and the
# router's policy versions are not the board's: they stay too (`svc demo` adopts its own policy as a new version).
_EMPTIED = (
    models.ScorecardDay,
    models.ScorecardWeek,
    models.ScorecardEntry,
    models.AcceptedEvent,
    models.RouterDecision,
    models.StageCount,
    models.SlotClaim,
    models.TimelineEntry,
    models.Ticket,
    models.Initiative,
    models.Slot,
    models.AgentRun,
    models.Setting,
    models.OutboxMessage,
    models.IdempotencyRecord,
    models.JobState,
)


def empty() -> None:
    """Delete every row of the board, its history and its queues, in one transaction."""
    with transaction():
        for model in _EMPTIED:
            model.delete().execute()
        models.Wallet.update(budget=0.0, spent=0.0, locked=False, updated_by=None).execute()


def row_counts() -> dict[str, int]:
    """Rows per table (by table name), for a summary a person reads."""
    return {model._meta.table_name: model.select().count() for model in _EMPTIED}
