"""Ticket rows: reads, inserts and the compare-and-swap update every stage change goes through."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from peewee import fn

from storage.db import is_postgres
from storage.models import Ticket
from storage.paging import decode_cursor, page_of


def get(key: str, *, for_update: bool = False) -> Ticket | None:
    query = Ticket.select().where(Ticket.key == key)
    if for_update and is_postgres():
        query = query.for_update()
    return query.first()


def exists(key: str) -> bool:
    return Ticket.select(Ticket.key).where(Ticket.key == key).exists()


def insert(**fields: Any) -> Ticket:
    return Ticket.create(**fields)


def insert_if_missing(**fields: Any) -> None:
    """Create the ticket unless one with its key exists (two first uses at once both succeed)."""
    Ticket.insert(**fields).on_conflict_ignore().execute()


def compare_and_swap(ticket: Ticket, *, expected_stage: str, expected_version: int, changes: dict[str, Any]) -> bool:
    """Write `changes` only if the row still has the stage and version it was read with.

    Returns False when another writer got there first; the caller's transaction must then be retried
    from a fresh read. On success the in-memory `ticket` carries the new version.
    """
    new_version = expected_version + 1
    updated = (
        Ticket.update(version=new_version, **{Ticket._meta.fields[k].name: v for k, v in changes.items()})
        .where((Ticket.key == ticket.key) & (Ticket.stage == expected_stage) & (Ticket.version == expected_version))
        .execute()
    )
    if updated != 1:
        return False
    for name, value in changes.items():
        setattr(ticket, name, value)
    ticket.version = new_version
    return True


def page(
    *,
    limit: int,
    cursor: str | None = None,
    stage: str | None = None,
    initiative_id: str | None = None,
    needs_you: bool | None = None,
    exclude_keys: tuple[str, ...] = (),
) -> tuple[list[Ticket], str | None]:
    """Tickets ordered by key, filtered; keyset-paged."""
    query = Ticket.select()
    if stage is not None:
        query = query.where(Ticket.stage == stage)
    if initiative_id is not None:
        query = query.where(Ticket.initiative == initiative_id)
    if needs_you is not None:
        query = query.where(Ticket.needs_you == needs_you)
    if exclude_keys:
        query = query.where(Ticket.key.not_in(list(exclude_keys)))
    if cursor:
        (after,) = decode_cursor(cursor, 1)
        query = query.where(Ticket.key > after)
    rows = list(query.order_by(Ticket.key).limit(limit + 1))
    return page_of(rows, limit, lambda t: [t.key])


def needs_you_oldest_first(*, limit: int, exclude_keys: tuple[str, ...] = ()) -> list[Ticket]:
    """The Needs-you list as a person reads it: the ticket waiting longest first."""
    query = Ticket.select().where(Ticket.needs_you == True)  # noqa: E712 (peewee expression)
    if exclude_keys:
        query = query.where(Ticket.key.not_in(list(exclude_keys)))
    return list(query.order_by(Ticket.stage_changed_at, Ticket.key).limit(limit))


def count_needs_you(*, exclude_keys: tuple[str, ...] = ()) -> int:
    query = Ticket.select().where(Ticket.needs_you == True)  # noqa: E712
    if exclude_keys:
        query = query.where(Ticket.key.not_in(list(exclude_keys)))
    return query.count()


def counts_by_stage() -> dict[str, int]:
    rows = Ticket.select(Ticket.stage, fn.COUNT(Ticket.key).alias("n")).group_by(Ticket.stage).tuples()
    return dict(rows)


def stuck(*, changed_before: datetime, live_stages: tuple[str, ...], limit: int) -> list[Ticket]:
    """Live tickets whose stage has not changed since `changed_before`, or that are blocked; oldest first."""
    query = (
        Ticket.select()
        .where(
            (Ticket.stage == "blocked")
            | ((Ticket.stage.in_(list(live_stages))) & (Ticket.stage_changed_at < changed_before))
        )
        .order_by(Ticket.stage_changed_at, Ticket.key)
        .limit(limit)
    )
    return list(query)


def count_stuck(*, changed_before: datetime, live_stages: tuple[str, ...]) -> int:
    return (
        Ticket.select()
        .where(
            (Ticket.stage == "blocked")
            | ((Ticket.stage.in_(list(live_stages))) & (Ticket.stage_changed_at < changed_before))
        )
        .count()
    )


def in_stage_since(stage: str, since: datetime, *, limit: int) -> list[Ticket]:
    """Tickets that reached `stage` at or after `since`, newest first."""
    return list(
        Ticket.select()
        .where((Ticket.stage == stage) & (Ticket.stage_changed_at >= since))
        .order_by(Ticket.stage_changed_at.desc(), Ticket.key)
        .limit(limit)
    )


def column(stage: str, *, limit: int) -> list[Ticket]:
    """A board column: the tickets in `stage`, most recently moved first."""
    return list(
        Ticket.select().where(Ticket.stage == stage).order_by(Ticket.stage_changed_at.desc(), Ticket.key).limit(limit)
    )


def count_in_stage_since(stage: str, since: datetime) -> int:
    return Ticket.select().where((Ticket.stage == stage) & (Ticket.stage_changed_at >= since)).count()


def in_stage_oldest_first(stage: str, *, limit: int) -> list[Ticket]:
    """Tickets in `stage`, the one that has sat there longest first."""
    return list(Ticket.select().where(Ticket.stage == stage).order_by(Ticket.stage_changed_at, Ticket.key).limit(limit))


def tracking(issue_id: str, identifier: str) -> Ticket | None:
    """The ticket whose `tracker_issue_id` is the tracker issue's id or its identifier, else the ticket keyed by
    the identifier."""
    row = Ticket.select().where(Ticket.tracker_issue_id.in_([issue_id, identifier])).order_by(Ticket.key).first()
    return row if row is not None else get(identifier)


def existing_keys(keys: set[str]) -> set[str]:
    """Which of `keys` name tickets on the board (one indexed lookup, however many keys)."""
    if not keys:
        return set()
    return {row.key for row in Ticket.select(Ticket.key).where(Ticket.key.in_(sorted(keys)))}
