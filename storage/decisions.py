"""Router decision rows (`api/web/decisions.py` shows them) and accepted events: what the shadow router recorded,
and the dedup of event ids."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from peewee import fn

from storage import statements
from storage.models import AcceptedEvent, RouterDecision, Ticket, stored_time
from storage.paging import decode_cursor, page_of

_DECISION = RouterDecision._meta.table_name
_AT = RouterDecision.evaluated_at.db_value


def record(**fields: Any) -> RouterDecision:
    """A new decision; one that held no job while dispatch was paused unless it says so (`held`)."""
    return statements.insert(RouterDecision, {"held": False, **fields})


def accepted(same_event: str) -> tuple[bool, RouterDecision | None]:
    """Whether an event with this same-event key (an envelope's id, or what a webhook sender signed or keeps across
    retries) was accepted before, and the decision recorded for it (None once the archivist has moved it out)."""
    bound = statements.select_one(AcceptedEvent, {"event_id": same_event})
    if bound is None:
        return False, None
    return True, statements.select_one(RouterDecision, {"id": bound.decision})


def accept(same_event: str, decision: RouterDecision, *, at: datetime, alias: str | None = None) -> None:
    """Bind the same-event key to its decision; a concurrent twin fails with IntegrityError (it is the key).

    `alias` (a webhook event's id, when its key is made otherwise) is bound too unless already taken, so the
    envelope sent again to `POST events` is a duplicate of it as before."""
    statements.insert(AcceptedEvent, {"event_id": same_event, "decision": decision.id, "received_at": at})
    if alias is not None and alias != same_event:
        AcceptedEvent.insert(event_id=alias, decision=decision.id, received_at=at).on_conflict_ignore().execute()


def first_of_kinds(
    subject_id: str,
    kinds: tuple[str, ...],
    *,
    since: datetime,
    until: datetime,
    other_than: int,
    outcomes: tuple[str, ...],
) -> datetime | None:
    """When the first decision about `subject_id` of one of `kinds` with one of `outcomes`, other than decision
    `other_than`, was evaluated in [since, until]; None when there is none (read through the subject's index; run
    for every decision an import records, so composed once)."""

    def sql(p: str) -> str:
        return (
            f'SELECT MIN("evaluated_at") FROM "{_DECISION}" WHERE "subject_id" = {p} '
            f'AND "kind" IN ({", ".join([p] * len(kinds))}) AND "outcome" IN ({", ".join([p] * len(outcomes))}) '
            f'AND "evaluated_at" >= {p} AND "evaluated_at" <= {p} AND "id" <> {p}'
        )

    value = statements.scalar(
        ("first_of_kinds", len(kinds), len(outcomes)),
        sql,
        [subject_id, *kinds, *outcomes, _AT(since), _AT(until), other_than],
    )
    return RouterDecision.evaluated_at.python_value(value) if value is not None else None


def page(
    *,
    limit: int,
    cursor: str | None = None,
    outcome: str | None = None,
    source: str | None = None,
    subject_id: str | None = None,
    since: datetime | None = None,
    exclude_outcome: str | None = None,
) -> tuple[list[RouterDecision], str | None]:
    """Decisions newest first (by id), filtered (`exclude_outcome` left out); keyset-paged on the id."""
    query = RouterDecision.select()
    if outcome is not None:
        query = query.where(RouterDecision.outcome == outcome)
    if exclude_outcome is not None:
        query = query.where(RouterDecision.outcome != exclude_outcome)
    if source is not None:
        query = query.where(RouterDecision.source == source)
    if subject_id is not None:
        query = query.where(RouterDecision.subject_id == subject_id)
    if since is not None:
        query = query.where(RouterDecision.evaluated_at >= since)
    if cursor:
        (before,) = decode_cursor(cursor, int)
        query = query.where(RouterDecision.id < before)
    rows = list(query.order_by(RouterDecision.id.desc()).limit(limit + 1))
    return page_of(rows, limit, lambda d: [d.id])


def count_by_outcome() -> dict[str, int]:
    """How many decisions of each outcome are recorded (a summary for people, e.g. after `svc demo`)."""
    rows = RouterDecision.select(RouterDecision.outcome, fn.COUNT(RouterDecision.id)).group_by(RouterDecision.outcome)
    return dict(rows.tuples())


def queued_without_decision(*, queued_before: datetime, quiet_since: datetime, limit: int) -> list[Ticket]:
    """Tickets in `queued` since before `queued_before` with no decision about them since `quiet_since`.

    What the poller asks dispatch for: the webhook that should have moved them on was missed.
    """
    recent = (
        RouterDecision.select(RouterDecision.subject_id)
        .where((RouterDecision.subject_id == Ticket.key) & (RouterDecision.evaluated_at >= quiet_since))
        .limit(1)
    )
    return list(
        Ticket.select()
        .where((Ticket.stage == "queued") & (Ticket.stage_changed_at < queued_before) & ~fn.EXISTS(recent))
        .order_by(Ticket.stage_changed_at, Ticket.key)
        .limit(limit)
    )


# The outcomes a backtest never reads: a rejected envelope has nothing to evaluate; the service's own events are no
# one's decision to judge.
NOT_BACKTESTED = ("rejected", "own")


def for_backtest(since: datetime | None, until: datetime | None, *, batch: int = 2000):
    """Every accepted decision in [since, until), oldest first, as tuples (id, event_id, subject_id, outcome,
    evaluated_at, gates, envelope, facts, policy, rule, role), the JSON columns still as text; read in keyset
    batches on the id, so memory does not grow with the range."""
    fields = (
        RouterDecision.id,
        RouterDecision.event_id,
        RouterDecision.subject_id,
        RouterDecision.outcome,
        RouterDecision.evaluated_at,
        RouterDecision.gates,
        RouterDecision.envelope,
        RouterDecision.facts,
        RouterDecision.policy,
        RouterDecision.rule,
        RouterDecision.role,
    )
    # Raw column values: the caller parses the JSON it needs (a decision without facts needs none of it).
    columns = ", ".join(f'"{f.column_name}"' for f in fields)
    params: list[object] = list(NOT_BACKTESTED)

    def sql(p: str) -> str:
        conditions = [f'"outcome" <> {p}', f'"outcome" <> {p}', f'"id" > {p}']
        if since is not None:
            conditions.append(f'"evaluated_at" >= {p}')
        if until is not None:
            conditions.append(f'"evaluated_at" < {p}')
        return (
            f'SELECT {columns} FROM "{RouterDecision._meta.table_name}" WHERE {" AND ".join(conditions)} '
            f'ORDER BY "id" LIMIT {int(batch)}'
        )

    key = ("for_backtest", since is not None, until is not None, batch)
    after = 0
    while True:
        values = [*params, after]
        if since is not None:
            values.append(RouterDecision.evaluated_at.db_value(since))
        if until is not None:
            values.append(RouterDecision.evaluated_at.db_value(until))
        found = statements.all_rows(key, sql, values)
        for row in found:
            yield (*row[:4], _moment(row[4]), *row[5:])
        if len(found) < batch:
            return
        after = found[-1][0]


def _moment(value: Any) -> datetime:
    """A stored evaluation time as an aware UTC datetime: SQLite's text read directly (peewee's general parser
    is a third of a backtest's time), PostgreSQL's datetime as it comes."""
    if isinstance(value, str):
        value = stored_time(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def get(decision_id: int) -> RouterDecision | None:
    return RouterDecision.get_or_none(RouterDecision.id == decision_id)


def by_ids(ids: list[int]) -> list[RouterDecision]:
    """The decisions with these ids, newest first."""
    if not ids:
        return []
    return list(RouterDecision.select().where(RouterDecision.id.in_(ids)).order_by(RouterDecision.id.desc()))
