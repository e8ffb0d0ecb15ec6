"""Slot (bay) rows and slot claims (`slot_claims` of the seed), served by `api/resources/slots.py`."""

from __future__ import annotations

from datetime import datetime

from storage import statements
from storage.db import is_postgres
from storage.models import Slot, SlotClaim, Ticket


def get(name: str, *, for_update: bool = False) -> Slot | None:
    """The slot; `for_update` locks its row (PostgreSQL) so claims and wipes of one slot take turns."""
    query = Slot.select().where(Slot.name == name)
    if for_update and is_postgres():
        query = query.for_update()
    return query.first()


def ensure(name: str, *, at: datetime) -> None:
    Slot.insert(name=name, created_at=at, last_activity_at=at).on_conflict_ignore().execute()


def claim_of(name: str, *, for_update: bool = False) -> SlotClaim | None:
    query = SlotClaim.select().where(SlotClaim.slot == name)
    if for_update and is_postgres():
        query = query.for_update()
    return query.first()


def claims_of_ticket(ticket_key: str) -> list[SlotClaim]:
    return list(SlotClaim.select().where(SlotClaim.ticket == ticket_key))


def add_claim(name: str, ticket_key: str, *, at: datetime) -> None:
    """Claim a slot; a concurrent claim of the same slot fails with IntegrityError (the slot is the key)."""
    SlotClaim.insert(slot=name, ticket=ticket_key, claimed_at=at).execute()


def touch(name: str, *, at: datetime) -> None:
    Slot.update(last_activity_at=at).where(Slot.name == name).execute()


def drop_claim(name: str, ticket_key: str) -> bool:
    """Drop the claim only if it still binds `ticket_key` (compare-and-swap)."""
    return SlotClaim.delete().where((SlotClaim.slot == name) & (SlotClaim.ticket == ticket_key)).execute() == 1


def mark_wiped(name: str, *, at: datetime) -> None:
    Slot.update(last_wiped_at=at, last_activity_at=at).where(Slot.name == name).execute()


def all_with_claims() -> list[tuple[Slot, SlotClaim | None]]:
    """Every slot and its claim (None when free), by name; a claim carries its ticket, read in the same query."""
    claims = {c.slot_name: c for c in SlotClaim.select(SlotClaim, Ticket).join(Ticket)}
    return [(slot, claims.get(slot.name)) for slot in Slot.select().order_by(Slot.name)]


def claims_of_finished_tickets(*, limit: int, ticket_key: str | None = None) -> list[SlotClaim]:
    """Claims whose ticket is done or cancelled (only `ticket_key`'s when given): what the slot steward releases."""
    query = SlotClaim.select(SlotClaim, Ticket).join(Ticket).where(Ticket.stage.in_(["done", "cancelled"]))
    if ticket_key is not None:
        query = query.where(SlotClaim.ticket == ticket_key)
    return list(query.order_by(SlotClaim.claimed_at).limit(limit))


def being_wiped(slot: Slot, *, now: datetime) -> bool:
    return slot.wipe_until is not None and slot.wipe_until > now


def lease_wipe(name: str, *, owner: str, now: datetime, until: datetime) -> bool:
    """Take the slot for a bay wipe until `until` (compare-and-swap); False while another wipe holds it."""
    taken = (
        Slot.update(wipe_owner=owner, wipe_until=until)
        .where((Slot.name == name) & (Slot.wipe_until.is_null() | (Slot.wipe_until <= now)))
        .execute()
    )
    return taken == 1


def end_wipe(name: str, *, owner: str) -> bool:
    """Give the wipe lease back; False when it had run out and someone else holds it now."""
    return (
        Slot.update(wipe_owner=None, wipe_until=None).where((Slot.name == name) & (Slot.wipe_owner == owner)).execute()
        == 1
    )


def idle_since(cutoff: datetime, *, limit: int) -> list[Slot]:
    """Slots with no activity since `cutoff` that have not been wiped since that activity."""
    return list(
        Slot.select()
        .where(
            (Slot.last_activity_at < cutoff)
            & ((Slot.last_wiped_at.is_null()) | (Slot.last_wiped_at < Slot.last_activity_at))
        )
        .order_by(Slot.last_activity_at)
        .limit(limit)
    )


def count_claimed_in_stages(stages: list[str], *, excluding_ticket: str | None = None) -> int:
    """Claims held by tickets in `stages` (other than `excluding_ticket`): the router's fleet gate, per event."""
    excluding = excluding_ticket is not None

    def sql(p: str) -> str:
        return (
            f'SELECT COUNT(*) FROM "{SlotClaim._meta.table_name}" AS c JOIN "{Ticket._meta.table_name}" AS t '
            f'ON t."key" = c."ticket_key" WHERE t."stage" IN ({", ".join(p for _ in stages)})'
            + (f' AND c."ticket_key" <> {p}' if excluding else "")
        )

    params = [*stages, excluding_ticket] if excluding else list(stages)
    return statements.scalar(("claimed_in_stages", len(stages), excluding), sql, params) or 0


def claiming_tickets() -> set[str]:
    """The keys of the tickets that hold a slot."""
    return {key for (key,) in SlotClaim.select(SlotClaim.ticket).tuples()}
