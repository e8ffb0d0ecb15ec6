"""Reconciliation rows, the storage side of `domain/router/reconciliation.py` and `domain/ops/reconciler.py`: the
delivery ids the service accepted, the ledger of gaps, and each hook's checkpoint (one `setting` row). Which states
a gap may move between, and what a hook that cannot be read is entered as, are the domain's (`domain/gaps.py`):
these functions take the states they write."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from peewee import ModelSelect, fn

from storage import statements
from storage.models import AcceptedDelivery, ReconciliationGap, RouterDecision, Setting, Ticket
from storage.paging import decode_cursor, page_of


@statements.record_of(ReconciliationGap)
@dataclass(slots=True, eq=False)
class GapRow:
    """A ledger row as its readers get it (`domain/gaps.py`'s `Gap` is read from it): the model's fields in the
    table's order (`record_of` checks so)."""

    id: int
    sender: str
    hook: str
    delivery: str | None
    guid: str | None
    event: str | None
    found_at: datetime
    updated_at: datetime
    state: str
    attempts: int
    detail: str


def _gap_rows(query: ModelSelect) -> list[GapRow]:
    return [GapRow(**row) for row in query.dicts()]


CHECKPOINTS = "reconciler.checkpoints"
# How many ids one `IN (...)` carries: well below SQLite's and PostgreSQL's limits on bound values.
_CHUNK = 200

# -- accepted deliveries -----------------------------------------------------------------------------------


def remember(sender: str, delivery: str, decision_id: int | None, *, at: datetime) -> None:
    """Record that `sender`'s delivery `delivery` was accepted (kept as first seen when it already was)."""
    AcceptedDelivery.insert(
        sender=sender, delivery=delivery, decision=decision_id, received_at=at
    ).on_conflict_ignore().execute()


def known(sender: str, deliveries: Iterable[str]) -> set[str]:
    """Which of `deliveries` the service accepted from `sender` (and still keeps)."""
    wanted = list(dict.fromkeys(deliveries))
    found: set[str] = set()
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        query = AcceptedDelivery.select(AcceptedDelivery.delivery).where(
            (AcceptedDelivery.sender == sender) & AcceptedDelivery.delivery.in_(chunk)
        )
        found.update(row.delivery for row in query)
    return found


def forget_before(sender: str, before: datetime) -> int:
    """Drop `sender`'s accepted deliveries received before `before`; how many were dropped."""
    return (
        AcceptedDelivery.delete()
        .where((AcceptedDelivery.sender == sender) & (AcceptedDelivery.received_at < before))
        .execute()
    )


# -- the ledger --------------------------------------------------------------------------------------------


def gaps(sender: str, hook: str, guids: Iterable[str]) -> dict[str, GapRow]:
    """The ledger rows of these guids of one hook, by guid."""
    wanted = list(dict.fromkeys(guids))
    found: dict[str, GapRow] = {}
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        query = ReconciliationGap.select().where(
            (ReconciliationGap.sender == sender) & (ReconciliationGap.hook == hook) & ReconciliationGap.guid.in_(chunk)
        )
        found.update({row.guid: row for row in _gap_rows(query) if row.guid is not None})
    return found


def gap(sender: str, hook: str, guid: str) -> GapRow | None:
    """The ledger row of `guid` of one hook, or None."""
    query = ReconciliationGap.select().where(
        (ReconciliationGap.sender == sender) & (ReconciliationGap.hook == hook) & (ReconciliationGap.guid == guid)
    )
    found = _gap_rows(query.limit(1))
    return found[0] if found else None


def open_gap(
    *,
    sender: str,
    hook: str,
    delivery: str | None,
    guid: str,
    event: str | None,
    state: str,
    attempts: int,
    detail: str,
    at: datetime,
    race: bool = False,
) -> None:
    """Enter a gap in the ledger. When that sender's hook has one for `guid` already, nothing changes; or, with
    `race` (the caller read it as absent), IntegrityError: another writer entered it first, and the unit of work
    starts over and reads it."""
    insert = ReconciliationGap.insert(
        sender=sender,
        hook=hook,
        delivery=delivery,
        guid=guid,
        event=event,
        found_at=at,
        updated_at=at,
        state=state,
        attempts=attempts,
        detail=detail,
    )
    (insert if race else insert.on_conflict_ignore()).execute()


def update_gap(
    gap_id: int, *, was: str, state: str, attempts: int, detail: str, at: datetime, delivery: str | None = None
) -> bool:
    """Move one gap from state `was` (compare-and-swap: False when it had moved meanwhile)."""
    changes: dict[Any, Any] = {
        ReconciliationGap.state: state,
        ReconciliationGap.attempts: attempts,
        ReconciliationGap.detail: detail,
        ReconciliationGap.updated_at: at,
    }
    if delivery is not None:
        changes[ReconciliationGap.delivery] = delivery
    updated = (
        ReconciliationGap.update(changes)
        .where((ReconciliationGap.id == gap_id) & (ReconciliationGap.state == was))
        .execute()
    )
    return updated == 1


def move_gaps_of(
    sender: str, guid: str, *, from_states: Iterable[str], to_state: str, detail: str, at: datetime
) -> int:
    """Move `sender`'s gaps of `guid` (of any of its hooks) that are in `from_states` to `to_state`; how many."""
    return (
        ReconciliationGap.update(
            {ReconciliationGap.state: to_state, ReconciliationGap.updated_at: at, ReconciliationGap.detail: detail}
        )
        .where(
            (ReconciliationGap.sender == sender)
            & (ReconciliationGap.guid == guid)
            & ReconciliationGap.state.in_(list(from_states))
        )
        .execute()
    )


def hook_row(sender: str, hook: str, *, state: str, detail: str, at: datetime) -> None:
    """Enter (or bring up to date) the ledger's one row of a hook itself (no guid), in `state`: its `attempts` the
    runs that entered it, its `detail` the latest."""
    row = (
        ReconciliationGap.select()
        .where(
            (ReconciliationGap.sender == sender) & (ReconciliationGap.hook == hook) & ReconciliationGap.guid.is_null()
        )
        .order_by(ReconciliationGap.id.desc())
        .first()
    )
    if row is None:
        ReconciliationGap.insert(
            sender=sender,
            hook=hook,
            delivery=None,
            guid=None,
            event=None,
            found_at=at,
            updated_at=at,
            state=state,
            attempts=1,
            detail=detail,
        ).execute()
        return
    ReconciliationGap.update(
        {
            ReconciliationGap.attempts: ReconciliationGap.attempts + 1,
            ReconciliationGap.detail: detail,
            ReconciliationGap.updated_at: at,
            ReconciliationGap.state: state,
        }
    ).where(ReconciliationGap.id == row.id).execute()


def page(*, limit: int, cursor: str | None = None) -> tuple[list[GapRow], str | None]:
    """The ledger newest first (by id); keyset-paged on the id."""
    query = ReconciliationGap.select()
    if cursor:
        (before,) = decode_cursor(cursor, int)
        query = query.where(ReconciliationGap.id < before)
    rows = _gap_rows(query.order_by(ReconciliationGap.id.desc()).limit(limit + 1))
    return page_of(rows, limit, lambda g: [g.id])


def count_in_state_since(state: str, since: datetime) -> int:
    """How many gaps reached `state` since `since` (the decisions page: recovered this week)."""
    return (
        ReconciliationGap.select(fn.COUNT(ReconciliationGap.id))
        .where((ReconciliationGap.state == state) & (ReconciliationGap.updated_at >= since))
        .scalar()
        or 0
    )


def in_state_since(state: str, since: datetime, *, limit: int) -> list[GapRow]:
    """The newest gaps in `state` updated since `since`, newest first."""
    return _gap_rows(
        ReconciliationGap.select()
        .where((ReconciliationGap.state == state) & (ReconciliationGap.updated_at >= since))
        .order_by(ReconciliationGap.updated_at.desc(), ReconciliationGap.id.desc())
        .limit(limit)
    )


# -- the tracker's side -----------------------------------------------------------------------------------


def tracked_issue_ids() -> list[str]:
    """Every tracker issue the board's tickets track (`tracker_issue_id`), sorted."""
    query = (
        Ticket.select(Ticket.tracker_issue_id)
        .where(Ticket.tracker_issue_id.is_null(False))
        .distinct()
        .order_by(Ticket.tracker_issue_id)
    )
    return [row.tracker_issue_id for row in query]


def last_stage_recorded(subject_id: str, *, kind: str, sources: tuple[str, ...], not_outcome: str) -> str | None:
    """The stage (`transition.to`) of the newest decision about `subject_id` of `kind` from one of `sources` whose
    outcome is not `not_outcome`, or None when there is none (which decisions count is the caller's rule)."""
    row = (
        RouterDecision.select(RouterDecision.envelope)
        .where(
            (RouterDecision.subject_id == subject_id)
            & (RouterDecision.kind == kind)
            & RouterDecision.source.in_(sources)
            & (RouterDecision.outcome != not_outcome)
        )
        .order_by(RouterDecision.id.desc())
        .first()
    )
    envelope = row.envelope if row is not None else None
    transition = envelope.get("transition") if isinstance(envelope, dict) else None
    stage = transition.get("to") if isinstance(transition, dict) else None
    return stage if isinstance(stage, str) else None


# -- checkpoints -------------------------------------------------------------------------------------------


def checkpoints() -> dict[str, Any]:
    """Each hook's checkpoint (what its next read starts from), by `sender:hook`."""
    row = Setting.select(Setting.value).where(Setting.key == CHECKPOINTS).first()
    return dict(row.value) if row is not None and isinstance(row.value, dict) else {}


def save_checkpoints(values: dict[str, Any], *, at: datetime) -> None:
    """Merge `values` into the stored checkpoints (read, then written, in the caller's transaction)."""
    merged = {**checkpoints(), **values}
    (
        Setting.insert(key=CHECKPOINTS, value=merged, updated_at=at, updated_by="svc:reconciler")
        .on_conflict(
            conflict_target=[Setting.key],
            update={Setting.value: merged, Setting.updated_at: at, Setting.updated_by: "svc:reconciler"},
        )
        .execute()
    )
