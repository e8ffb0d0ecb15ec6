"""Ticket rows (served by `api/resources/tickets.py`): reads, inserts and the compare-and-swap update every stage
change goes through."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from peewee import fn

from storage import statements
from storage.models import StageCount, Ticket
from storage.paging import decode_cursor, page_of


def get(key: str, *, for_update: bool = False) -> Ticket | None:
    """The ticket, locked for the rest of the transaction on PostgreSQL when `for_update`."""
    return statements.select_one(Ticket, {"key": key}, for_update=for_update)


def exists(key: str) -> bool:
    return Ticket.select(Ticket.key).where(Ticket.key == key).exists()


def insert(**fields: Any) -> Ticket:
    """A new ticket (a raced twin with the same key fails with IntegrityError); its stage is counted."""
    row = statements.insert(Ticket, fields)
    _count(fields["stage"], +1)
    return row


def _count(stage: str, delta: int) -> None:
    table = StageCount._meta.table_name
    statements.execute(
        ("stage_count",),
        lambda p: (
            f'INSERT INTO "{table}" ("stage", "tickets") VALUES ({p}, {p}) '
            f'ON CONFLICT ("stage") DO UPDATE SET "tickets" = "{table}"."tickets" + excluded."tickets"'
        ),
        [stage, delta],
    )


def _move_count(source: str, target: str) -> None:
    # Always in the same order, so two transactions moving tickets between the same stages cannot deadlock.
    for stage, delta in sorted([(source, -1), (target, +1)]):
        _count(stage, delta)


def recount() -> None:
    """Rebuild the stage counts from the tickets (a migration, or a database filled behind the service's back)."""
    counts = Ticket.select(Ticket.stage, fn.COUNT(Ticket.key)).group_by(Ticket.stage).tuples()
    StageCount.delete().execute()
    rows = [{"stage": stage, "tickets": n} for stage, n in counts]
    if rows:
        StageCount.insert_many(rows).execute()


def compare_and_swap(
    ticket: Ticket,
    *,
    expected_stage: str,
    expected_version: int,
    changes: dict[str, Any],
    read: Mapping[str, Any] | None = None,
) -> bool:
    """`UPDATE ticket SET <changes>, version = <version + 1> WHERE key = ? AND stage = ? AND version = ?`: False when
    it touched no row (another writer got there first: the caller's transaction is retried from a fresh read). On
    success the in-memory `ticket` carries the changes and the new version.

    `read` holds columns as this transaction read them; a change that leaves one so is not written (SQLite then leaves
    its indexes alone). That is right by construction: the swap touches the row only at the version it was read at.
    """
    new_version = expected_version + 1
    writes = {name: value for name, value in changes.items() if read is None or name not in read or read[name] != value}
    writes["version"] = new_version
    where = {"key": ticket.key, "stage": expected_stage, "version": expected_version}
    if statements.update(Ticket, writes, where) != 1:
        return False
    if changes.get("stage", expected_stage) != expected_stage:
        _move_count(expected_stage, changes["stage"])
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
    shown_as_not_needing: tuple[str, ...] = (),
) -> tuple[list[Ticket], str | None]:
    """Tickets ordered by key, filtered; keyset-paged. `shown_as_not_needing` are keys stored as needing
    someone that the list shows as not (the writing ticket while automation is off)."""
    query = Ticket.select()
    if stage is not None:
        query = query.where(Ticket.stage == stage)
    if initiative_id is not None:
        query = query.where(Ticket.initiative == initiative_id)
    if needs_you is True:
        query = query.where(Ticket.needs_you == True)  # noqa: E712 (a peewee expression)
        if shown_as_not_needing:
            query = query.where(Ticket.key.not_in(list(shown_as_not_needing)))
    elif needs_you is False:
        condition = Ticket.needs_you == False  # noqa: E712
        if shown_as_not_needing:
            condition |= Ticket.key.in_(list(shown_as_not_needing))
        query = query.where(condition)
    if cursor:
        (after,) = decode_cursor(cursor, str)
        query = query.where(Ticket.key > after)
    rows = list(query.order_by(Ticket.key).limit(limit + 1))
    return page_of(rows, limit, lambda t: [t.key])


def needs_you_oldest_first(*, limit: int, exclude_keys: tuple[str, ...] = ()) -> list[Ticket]:
    """The Needs-you list as a person reads it: the ticket waiting longest first (an index range, any size)."""

    def tail(p: str) -> str:
        return f'WHERE "needs_you" = {p} {_not_in(exclude_keys, p)} ORDER BY "stage_changed_at", "key" LIMIT {p}'

    return statements.rows(Ticket, ("needs_you", len(exclude_keys)), tail, [True, *exclude_keys, limit])


def count_needs_you(*, exclude_keys: tuple[str, ...] = ()) -> int:
    def sql(p: str) -> str:
        return f'SELECT COUNT(*) FROM "{Ticket._meta.table_name}" WHERE "needs_you" = {p} {_not_in(exclude_keys, p)}'

    return statements.scalar(("count_needs_you", len(exclude_keys)), sql, [True, *exclude_keys]) or 0


def _not_in(keys: tuple[str, ...], p: str) -> str:
    return f'AND "key" NOT IN ({", ".join(p for _ in keys)})' if keys else ""


def counts_by_initiative(initiative_ids: list[str]) -> dict[str, dict[str, int]]:
    """Tickets per stage of each of `initiative_ids` (one index range per initiative: a page of initiatives
    costs what their tickets cost, not what the board holds)."""
    if not initiative_ids:
        return {}
    counts: dict[str, dict[str, int]] = {ident: {} for ident in initiative_ids}
    query = (
        Ticket.select(Ticket.initiative, Ticket.stage, fn.COUNT(Ticket.key))
        .where(Ticket.initiative.in_(initiative_ids))
        .group_by(Ticket.initiative, Ticket.stage)
        .tuples()
    )
    for ident, stage, n in query:
        counts[ident][stage] = n
    return counts


def counts_by_stage() -> dict[str, int]:
    """Tickets per stage (stages with none may be absent), from the maintained counts: no scan of the tickets."""
    return {stage: n for stage, n in StageCount.select(StageCount.stage, StageCount.tickets).tuples() if n}


def stuck(
    *, changed_before: datetime, live_stages: tuple[str, ...], limit: int, exclude_keys: tuple[str, ...] = ()
) -> list[Ticket]:
    """Live tickets whose stage has not changed since `changed_before`, or that are blocked; oldest first."""
    query = Ticket.select().where(
        (Ticket.stage == "blocked")
        | ((Ticket.stage.in_(list(live_stages))) & (Ticket.stage_changed_at < changed_before))
    )
    if exclude_keys:
        query = query.where(Ticket.key.not_in(list(exclude_keys)))
    return list(query.order_by(Ticket.stage_changed_at, Ticket.key).limit(limit))


def count_stuck(*, changed_before: datetime, live_stages: tuple[str, ...], exclude_keys: tuple[str, ...] = ()) -> int:
    """Blocked tickets (from the maintained counts) plus the other live ones unmoved since `changed_before`
    (one index range per stage: the cost follows how many are stuck, not how many tickets there are), leaving
    out `exclude_keys`."""
    others = [stage for stage in live_stages if stage != "blocked"]

    def sql(p: str) -> str:
        return (
            f'SELECT COUNT(*) FROM "{Ticket._meta.table_name}" WHERE "stage" IN ({", ".join(p for _ in others)}) '
            f'AND "stage_changed_at" < {p} {_not_in(exclude_keys, p)}'
        )

    unmoved = statements.scalar(
        ("count_stuck", len(others), len(exclude_keys)),
        sql,
        [*others, Ticket.stage_changed_at.db_value(changed_before), *exclude_keys],
    )
    blocked = counts_by_stage().get("blocked", 0)
    if exclude_keys:  # the maintained count includes them: a lookup by key each
        blocked -= Ticket.select().where(Ticket.key.in_(list(exclude_keys)) & (Ticket.stage == "blocked")).count()
    return blocked + (unmoved or 0)


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


def numbered_key_prefixes() -> set[str]:
    """The prefixes of the board's numbered keys (`PORT` of `PORT-12`; not `WRITING` of `WRITING-DAILY`).

    One pass over the key index; callers cache the answer (see `domain/router/ticket_keys.py`)."""
    prefixes = set()
    for (key,) in Ticket.select(Ticket.key).tuples().iterator():
        prefix, _, rest = key.partition("-")
        if rest.isdigit():
            prefixes.add(prefix)
    return prefixes


def stages() -> Iterator[tuple[str, str, str]]:
    """(key, stage, initiative id) of every ticket, streamed (a replay reads the whole board once)."""
    return Ticket.select(Ticket.key, Ticket.stage, Ticket.initiative).tuples().iterator()
