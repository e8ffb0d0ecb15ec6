"""Marks of change (`api/web/freshness.py` makes ETags of them): small values that move whenever a part of the
board changes, read without reading the board.

The web board's pages answer `If-None-Match` with 304 while these stand still, so an idle page costs one
statement, never a render. Each mark comes from what the store keeps anyway: the newest id of an append-only
table (an index's last entry) and how many of the ids just below it are there, the maintained stage counts,
and the `updated_at` of tables of a few rows.
Every change to a ticket writes exactly one timeline entry (a stage change, a claim, a release, a receipt, the
automation toggle's audit), so the newest entry's id stands for all of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from storage import statements
from storage.models import (
    Account,
    AgentRun,
    DispatchJob,
    Initiative,
    ReconciliationGap,
    RouterDecision,
    RouterPolicyVersion,
    Setting,
    Slot,
    SlotClaim,
    StageCount,
    TimelineEntry,
    Wallet,
)


def _table(model) -> str:
    return f'"{model._meta.table_name}"'


def _max(model, column: str) -> str:
    return f'(SELECT MAX("{column}") FROM {_table(model)})'


# On PostgreSQL an id is taken when a row is inserted, not when its transaction commits: a change whose entry is
# id 100 may commit after one with id 101 has, and the newest id would not move when it lands. How many of the
# last WINDOW ids are there moves then. (A transaction that stays open while WINDOW more rows are written is
# caught by the minute in the page's tag.) Each count is a short range of an index: the primary key, or the
# (ticket, id) and (subject, id) indexes with `where`.
WINDOW = 64


def _newest(model, where: str = "") -> tuple[str, str]:
    """The newest id of an append-only table (of its rows matching `where`) and how many of the last WINDOW ids are
    visible. `where` appears three times in the two."""
    only = f" WHERE {where}" if where else ""
    newest = f'(SELECT MAX("id") FROM {_table(model)}{only})'
    also = f" AND {where}" if where else ""
    return newest, f'(SELECT COUNT(*) FROM {_table(model)} WHERE "id" > {newest} - {WINDOW}{also})'


def _count(model, what: str = "*") -> str:
    return f"(SELECT COUNT({what}) FROM {_table(model)})"


# One scalar subquery per mark; every one is an index's last entry (or a short range of it) or a table of a
# handful of rows.
PARTS: dict[str, tuple[str, ...]] = {
    # The newest timeline entry, and how many tickets there are (the stage counts: ten rows at most).
    "tickets": (*_newest(TimelineEntry), f'(SELECT SUM("tickets") FROM {_table(StageCount)})'),
    # How many tickets there are, alone: which keys are tickets on the board, and no more (tickets are never
    # deleted one by one).
    "ticket_count": (f'(SELECT SUM("tickets") FROM {_table(StageCount)})',),
    "runs": _newest(AgentRun),
    "settings": (_max(Setting, "updated_at"),),
    "wallet": (_max(Wallet, "updated_at"),),
    # Bays are few. A wipe's lease writes no timeline entry (the release does, when it is done), so the slot
    # rows themselves are read.
    "slots": (
        _count(Slot),
        _max(Slot, "last_activity_at"),
        _max(Slot, "last_wiped_at"),
        _max(Slot, "wipe_until"),
        _count(Slot, '"wipe_owner"'),
        _count(SlotClaim),
    ),
    "initiatives": (_count(Initiative), _max(Initiative, "updated_at")),
    "decisions": _newest(RouterDecision),
    # The ledger: a new gap, or one that moved (redelivered, recovered, given up).
    "reconciliation": (_newest(ReconciliationGap)[0], _max(ReconciliationGap, "updated_at")),
    # The router's policy: a new version (versions are never changed).
    "policy": _newest(RouterPolicyVersion),
    # The dispatch switch (one setting row): every page says when dispatch is paused.
    "dispatch": (f'(SELECT "updated_at" FROM {_table(Setting)} WHERE "key" = \'dispatch\')',),
    # Dispatch jobs: a new one (queued with its decision), and each move between states (a claim, a result, a cancel,
    # a lease put back: the queued and running counts, each a short range of the (state, id) index) or of a lease (a
    # heartbeat: the newest lease, the last entry of the (state, leased_until) index). A job's own page adds the row.
    "jobs": (
        *_newest(DispatchJob),
        f"""(SELECT COUNT(*) FROM {_table(DispatchJob)} WHERE "state" = 'queued')""",
        f"""(SELECT COUNT(*) FROM {_table(DispatchJob)} WHERE "state" = 'running')""",
        f"""(SELECT MAX("leased_until") FROM {_table(DispatchJob)} WHERE "state" = 'running')""",
    ),
    # The workers: one added or removed, and each refusal (a worker's calls that pass move the jobs' marks, and its
    # "last heard" reads in minutes, which the page's tag holds already).
    "workers": (_count(Account), _max(Account, "refused_at")),
}
# What every page shows, whatever else it shows: its marks are in every page's tag.
EVERY_PAGE = ("dispatch",)


def marks(parts: Iterable[str]) -> tuple[Any, ...]:
    """The marks of `parts` (names of `PARTS`) and of `EVERY_PAGE`, in one statement."""
    names = (*parts, *(part for part in EVERY_PAGE if part not in parts))
    return statements.row(
        ("freshness", names), lambda p: "SELECT " + ", ".join(column for name in names for column in PARTS[name]), []
    )


def ticket_marks(key: str, parts: Iterable[str] = ()) -> tuple[Any, ...]:
    """The marks of one ticket — its newest timeline entry (every change to it writes one) and the router's
    newest decision about it, each the last entry of an index on (ticket, id) and (subject, id) — and those of
    `parts` (and those of `EVERY_PAGE`), in one statement."""
    names = (*parts, *(part for part in EVERY_PAGE if part not in parts))

    def sql(p: str) -> str:
        entries = _newest(TimelineEntry, f'"ticket_key" = {p}')
        decisions = _newest(RouterDecision, f'"subject_id" = {p}')
        # The ticket's newest entry first: None says there is no such ticket (every ticket has its creation entry).
        return "SELECT " + ", ".join((*entries, *decisions, *(column for name in names for column in PARTS[name])))

    # Every parameter is the ticket's key: three in each `_newest` (the parts have none).
    return statements.row(("freshness_ticket", names), sql, [key] * 6)
