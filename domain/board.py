"""The board's units of work: tickets, initiatives, slots and the wallet.

Each public method is one transaction. Stage changes run `machines.ticket`, then persist with a
compare-and-swap and exactly one timeline entry; their consequences that leave the process (slot release,
tracker close) are queued in the outbox in the same transaction.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from domain import automation, entity_tags, units
from domain.clock import Clock
from domain.config import Config
from domain.errors import Conflict, NotFound, TransitionForbidden
from domain.units import StaleRead
from machines import ticket as ticket_machine
from machines.stages import FINAL_STAGES, STAGES, needs_you
from storage import freshness, initiatives, outbox, slots, tickets, timeline, wallet
from storage.models import Initiative, Slot, SlotClaim, Ticket, TimelineEntry, Wallet

# The tags of an `If-Match` header (`domain/entity_tags.py`), or None when the request sent none.
IfMatch = Sequence[str] | None

TIMELINE_ON_TICKET = 20
SLOT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
TRACKER_CLOSE_PREFIX = "PORT-"
# Outbox kinds this module queues; the jobs process delivers them (`jobs/handlers.py`).
SLOT_RELEASE_KIND = "slot_release"
TRACKER_CLOSE_KIND = "tracker_close"


@dataclass(frozen=True)
class StageChange:
    """What a stage-change listener hears, inside the transaction that made the change."""

    ticket: Ticket
    from_stage: str | None
    to_stage: str
    from_waiting_on: str | None
    to_waiting_on: str | None
    actor: str
    at: datetime
    event: str
    # The one timeline entry the change wrote (None for a creation announced without one).
    entry: TimelineEntry | None = None
    # What kind of actor made it, when the caller knows better than the name says (a worker account acts as an
    # agent); None: the name says (`domain/router/board_events.actor_of`).
    actor_kind: str | None = None


StageListener = Callable[[StageChange], None]


@dataclass(frozen=True)
class SlotClaimed:
    """What a claim listener hears, inside the transaction of a new claim: `ticket_key` took slot `slot`."""

    slot: str
    ticket_key: str
    actor: str
    at: datetime
    # The dispatch job whose claim took the slot (None: a person's or a script's claim, `POST slots/{name}/claim`).
    job_id: int | None = None


ClaimListener = Callable[[SlotClaimed], None]


@dataclass(frozen=True)
class SlotView:
    slot: Slot
    claim: SlotClaim | None


class Board:
    def __init__(
        self,
        config: Config,
        clock: Clock,
        *,
        stage_listeners: tuple[StageListener, ...] = (),
        claim_listeners: tuple[ClaimListener, ...] = (),
    ):
        """`stage_listeners` hear every stage change and `claim_listeners` every new slot claim, each inside
        its transaction (the composition root wires the router's: `queue_for_router`, `scorecard.slot_claimed`)."""
        self.config = config
        self.clock = clock
        self.stage_listeners = list(stage_listeners)
        self.claim_listeners = list(claim_listeners)

    # -- tickets -----------------------------------------------------------------------------------------

    def create_ticket(self, body: dict[str, Any], *, actor: str) -> Ticket:
        def work() -> Ticket:
            key = body["key"]
            if tickets.exists(key):
                raise Conflict(f"a ticket with key {key!r} already exists")
            if not initiatives.exists(body["initiative_id"]):
                raise NotFound("initiative", body["initiative_id"], path="/initiative_id")
            now = self.clock()
            stage = body.get("stage") or "agreement"
            row = tickets.insert(
                key=key,
                initiative=body["initiative_id"],
                title=body["title"],
                stage=stage,
                waiting_on=None,
                tracker_issue_id=body.get("tracker_issue_id"),
                assigned_slot=None,
                link=None,
                needs_you=needs_you(stage, None),
                version=1,
                stage_changed_at=now,
                created_at=now,
                updated_at=now,
            )
            timeline.append(
                key,
                kind="created",
                summary=f"created in {stage} by {actor}",
                at=now,
                data={"stage": stage, "actor": actor},
            )
            self.announce(StageChange(row, None, stage, None, None, actor, now, "create"))
            return row

        return self._shown(units.run(work, what="creating the ticket"))

    def ticket(self, key: str, *, with_timeline: bool = True) -> tuple[Ticket, list[TimelineEntry]]:
        """The ticket and its newest timeline entries (none read when not `with_timeline`: a worker's read)."""
        row = tickets.get(key)
        if row is None:
            raise NotFound("ticket", key)
        return self._shown(row), timeline.newest(key, TIMELINE_ON_TICKET) if with_timeline else []

    def tickets(
        self,
        *,
        limit: int,
        cursor: str | None,
        stage: str | None,
        initiative_id: str | None,
        needs_you: bool | None,
    ) -> tuple[list[Ticket], str | None]:
        # A hidden ticket is stored as needing someone but shown as not, so it belongs under needs_you=false.
        rows, after = tickets.page(
            limit=limit,
            cursor=cursor,
            stage=stage,
            initiative_id=initiative_id,
            needs_you=needs_you,
            shown_as_not_needing=automation.hidden_from_needs_you() if needs_you is not None else (),
        )
        return self._shown_all(rows), after

    def needs_you_list(self, *, limit: int = 50) -> list[Ticket]:
        """The Needs-you list as people read it: oldest first."""
        rows = tickets.needs_you_oldest_first(limit=limit, exclude_keys=automation.hidden_from_needs_you())
        return self._shown_all(rows)

    def columns(self, *, per_stage: int = 30) -> dict[str, tuple[list[Ticket], int]]:
        """The board: for each stage, its most recently moved tickets and how many there are in all."""
        counts = tickets.counts_by_stage()
        return {
            stage: (self._shown_all(tickets.column(stage, limit=per_stage)), counts.get(stage, 0)) for stage in STAGES
        }

    def on_board(self, keys: set[str]) -> set[str]:
        """Which of `keys` are tickets on the board (the web board links those to their pages)."""
        return tickets.existing_keys(keys)

    def timeline(self, key: str, *, limit: int, cursor: str | None) -> tuple[list[TimelineEntry], str | None]:
        if not tickets.exists(key):
            raise NotFound("ticket", key)
        return timeline.page(key, limit=limit, cursor=cursor)

    def move(self, key: str, body: dict[str, Any], *, actor: str, if_match: IfMatch = None) -> Ticket:
        target = body["to"]

        def step(row: Ticket) -> str:
            event = ticket_machine.move_event(row.stage, target)
            if event is None:
                allowed = ", ".join(ticket_machine.allowed_moves(row.stage)) or "none"
                raise TransitionForbidden(
                    f"cannot move {row.key} from {row.stage} to {target}; allowed from {row.stage}: {allowed}",
                    current=row.stage,
                    event="move",
                )
            ticket_machine.fire(row, event)
            # A finished ticket waits on no one; it would otherwise sit on Needs-you for good.
            row.waiting_on = None if row.stage in FINAL_STAGES else body.get("waiting_on")
            return event

        return self._change_stage(
            key, step, kind="stage_changed", actor=actor, reason=body.get("reason"), if_match=if_match
        )

    def mark_done(self, key: str, body: dict[str, Any], *, actor: str, if_match: IfMatch = None) -> Ticket:
        return self._finish(
            key, "mark_done", kind="marked_done", actor=actor, reason=body.get("reason"), if_match=if_match
        )

    def cancel(self, key: str, body: dict[str, Any], *, actor: str, if_match: IfMatch = None) -> Ticket:
        return self._finish(key, "cancel", kind="cancelled", actor=actor, reason=body.get("reason"), if_match=if_match)

    def _finish(self, key: str, event: str, *, kind: str, actor: str, reason: str | None, if_match: IfMatch) -> Ticket:
        def step(row: Ticket) -> str:
            ticket_machine.fire(row, event)
            row.waiting_on = None
            return event

        return self._change_stage(key, step, kind=kind, actor=actor, reason=reason, if_match=if_match)

    def _change_stage(
        self,
        key: str,
        step: Callable[[Ticket], str],
        *,
        kind: str,
        actor: str,
        reason: str | None,
        if_match: IfMatch,
    ) -> Ticket:
        def work() -> Ticket:
            row = tickets.get(key, for_update=True)
            if row is None:
                raise NotFound("ticket", key)
            entity_tags.check_ticket(if_match, row, lambda: next(iter(timeline.newest(key, 1)), None))
            change = apply_stage_change(
                row, step, clock=self.clock, kind=kind, actor=actor, reason=reason, config=self.config
            )
            self.announce(change)
            return row

        return self._shown(units.run(work, what=f"changing {key}"))

    def announce(self, change: StageChange) -> None:
        """Tell every stage listener about a change, in its transaction."""
        for listener in self.stage_listeners:
            listener(change)

    def step_ticket(
        self,
        row: Ticket,
        *,
        move: str | None,
        waiting_on: str | None,
        kind: str,
        event: str,
        actor: str,
        at: datetime,
        summary: str,
        data: dict[str, Any],
        extra_changes: dict[str, Any] | None = None,
        actor_kind: str | None = None,
    ) -> StageChange:
        """Inside a transaction, with `row` read locked: what the service itself does to a ticket (a dispatch job's
        claim, its end, its pull request, the pull request's own events). Fire the ticket machine's event `move`
        where the machine allows it (else the ticket stays where it is), set what it waits on, and write one
        timeline entry of `kind` (`event` names the step when no move was made), heard by the stage listeners."""
        fired = move if move is not None and ticket_machine.allows(row.stage, move) else None

        def step(ticket: Ticket) -> str:
            if fired is not None:
                ticket_machine.fire(ticket, fired)
            ticket.waiting_on = None if ticket.stage in FINAL_STAGES else waiting_on
            return fired or event

        change = apply_stage_change(
            row,
            step,
            clock=lambda: at,
            kind=kind,
            actor=actor,
            config=self.config,
            summary=summary,
            data=data,
            extra_changes=extra_changes,
        )
        if actor_kind is not None:
            change = replace(change, actor_kind=actor_kind)
        self.announce(change)
        return change

    def set_job(self, row: Ticket, job_id: int | None, job_state: str | None, *, at: datetime) -> None:
        """Inside a transaction, with `row` read locked: the dispatch job a worker is on for the ticket (queued or
        running), or none; whether the ticket needs someone follows (a ticket with a job on it does not). No timeline
        entry: the job's own step writes one."""
        changes = {
            "job_id": job_id,
            "job_state": job_state,
            "needs_you": needs_you(row.stage, row.waiting_on, job_state),
            "updated_at": at,
        }
        if not tickets.compare_and_swap(row, expected_stage=row.stage, expected_version=row.version, changes=changes):
            raise StaleRead(row.key)

    # -- marks of change (what the web board's ETags are made of) ------------------------------------------

    def marks(self, parts: tuple[str, ...]) -> tuple[Any, ...]:
        """Values that move whenever one of `parts` of the board changes (`storage.freshness.PARTS`), read in
        one cheap statement: a page that has not changed answers 304 without being read or rendered."""
        return freshness.marks(parts)

    def ticket_marks(self, key: str, parts: tuple[str, ...] = ()) -> tuple[Any, ...]:
        """Values that move whenever the ticket `key` changes, the router decides something about it, or one of
        `parts` changes."""
        return freshness.ticket_marks(key, parts)

    # -- Needs-you and the writing toggle --------------------------------------------------------------

    def _shown(self, row: Ticket) -> Ticket:
        return automation.shown([row])[0]

    def _shown_all(self, rows: list[Ticket]) -> list[Ticket]:
        return automation.shown(rows)

    # -- initiatives ---------------------------------------------------------------------------------------

    def create_initiative(self, body: dict[str, Any], *, actor: str) -> Initiative:
        def work() -> Initiative:
            ident = body.get("id") or _slug(body["name"])
            if initiatives.exists(ident):
                raise Conflict(f"an initiative with id {ident!r} already exists")
            now = self.clock()
            return initiatives.insert(
                id=ident,
                name=body["name"],
                stage=body.get("stage") or "agree",
                created_at=now,
                updated_at=now,
                updated_by=actor,
            )

        return units.run(work, what="creating the initiative")

    def initiative(self, ident: str) -> Initiative:
        row = initiatives.get(ident)
        if row is None:
            raise NotFound("initiative", ident)
        return row

    def initiatives(self, *, limit: int, cursor: str | None) -> tuple[list[Initiative], str | None]:
        return initiatives.page(limit=limit, cursor=cursor)

    def initiative_ticket_counts(self, ids: list[str]) -> dict[str, dict[str, int]]:
        """How many tickets each of the initiatives `ids` has, per stage."""
        return tickets.counts_by_initiative(ids)

    def update_initiative(
        self, ident: str, body: dict[str, Any], *, actor: str, if_match: IfMatch = None
    ) -> Initiative:
        def work() -> Initiative:
            row = initiatives.get(ident, for_update=True)
            if row is None:
                raise NotFound("initiative", ident)
            entity_tags.check_initiative(if_match, row)
            if not initiatives.update(ident, dict(body), at=self.clock(), by=actor):
                raise NotFound("initiative", ident)
            return initiatives.get(ident)

        return units.run(work, what=f"changing initiative {ident}")

    # -- slots ---------------------------------------------------------------------------------------------

    def slots(self) -> list[SlotView]:
        return [SlotView(slot, claim) for slot, claim in slots.all_with_claims()]

    def slot(self, name: str) -> SlotView:
        row = slots.get(name)
        if row is None:
            raise NotFound("slot", name)
        return SlotView(row, slots.claim_of(name))

    def claim_slot(self, name: str, body: dict[str, Any], *, actor: str) -> SlotView:
        key = body["ticket"]
        if not SLOT_NAME.match(name):
            raise NotFound("slot", name)

        def work() -> SlotView:
            row = tickets.get(key, for_update=True)
            if row is None:
                raise NotFound("ticket", key, path="/ticket")
            self.hold_slot(name, row, actor=actor, at=self.clock())
            return SlotView(slots.get(name), slots.claim_of(name))

        return units.run(work, what=f"claiming slot {name}")

    def hold_slot(
        self, name: str, row: Ticket, *, actor: str, at: datetime, record: bool = True, job_id: int | None = None
    ) -> None:
        """Inside a transaction, with `row` read locked: hold slot `name` for the ticket (creating the slot on first
        use), as `POST slots/{name}/claim` does; a slot held by another ticket, being wiped, or a finished ticket or
        one holding another slot is `Conflict`. `record=False` leaves the timeline entry to the caller (a job's
        claim says it all in one entry); `job_id` names the dispatch job that claims it, for the claim listeners."""
        key = row.key
        slots.ensure(name, at=at)
        # Locking the slot row makes a claim and the slot steward's wipe lease take turns.
        slot_row = slots.get(name, for_update=True)
        current = slots.claim_of(name, for_update=True)
        if current is not None and current.ticket_key != key:
            raise Conflict(f"slot {name} is held by {current.ticket_key}")
        if current is None:
            if slots.being_wiped(slot_row, now=at):
                raise Conflict(f"slot {name} is being wiped; claim it again once the wipe is done")
            if row.stage in FINAL_STAGES:
                raise Conflict(f"{key} is {row.stage}; a finished ticket cannot claim a slot", current_stage=row.stage)
            if row.assigned_slot and row.assigned_slot != name:
                raise Conflict(f"{key} already holds slot {row.assigned_slot}")
            slots.add_claim(name, key, at=at)
            claimed = SlotClaimed(name, key, actor, at, job_id)
            for listener in self.claim_listeners:
                listener(claimed)
            if not tickets.compare_and_swap(
                row,
                expected_stage=row.stage,
                expected_version=row.version,
                changes={"assigned_slot": name, "updated_at": at},
            ):
                raise StaleRead(key)
            if record:
                timeline.append(
                    key,
                    kind="slot_claimed",
                    summary=f"claimed slot {name} ({actor})",
                    at=at,
                    data={"slot": name, "actor": actor},
                )
        slots.touch(name, at=at)

    def touch_slot(self, name: str, *, at: datetime) -> None:
        """Inside a transaction: the slot is in use now (its idle time starts again)."""
        slots.touch(name, at=at)

    def free_slot(self, name: str, row: Ticket, *, at: datetime) -> bool:
        """Inside a transaction, with `row` read locked: drop the ticket's claim of slot `name` and clear its
        `assigned_slot`, without a wipe (nothing of the ticket's work is left in it, or the idle reclaim wipes it);
        False when the ticket did not hold it. The caller writes the timeline entry."""
        if not slots.drop_claim(name, row.key):
            return False
        if row.assigned_slot == name and not tickets.compare_and_swap(
            row,
            expected_stage=row.stage,
            expected_version=row.version,
            changes={"assigned_slot": None, "updated_at": at},
        ):
            raise StaleRead(row.key)
        return True

    # -- wallet --------------------------------------------------------------------------------------------

    def wallet(self) -> Wallet:
        return wallet.get()

    def put_wallet(self, body: dict[str, Any], *, actor: str, if_match: IfMatch = None) -> Wallet:
        def work() -> Wallet:
            entity_tags.check_wallet(if_match, wallet.get(for_update=True))
            wallet.put(
                budget=float(body["budget"]),
                spent=float(body["spent"]),
                locked=body["locked"],
                at=self.clock(),
                by=actor,
            )
            return wallet.get()

        return units.run(work, what="setting the wallet")

    def wallet_and_percent_used(self) -> tuple[Wallet, float]:
        """The wallet and how much of its budget is spent, in percent (`storage.wallet.percent_used`), as the web
        board shows them."""
        row = wallet.get()
        return row, wallet.percent_used(row)


def apply_stage_change(
    row: Ticket,
    step: Callable[[Ticket], str],
    *,
    clock: Clock,
    kind: str,
    actor: str,
    reason: str | None = None,
    config: Config,
    summary: str | None = None,
    data: dict[str, Any] | None = None,
    extra_changes: dict[str, Any] | None = None,
) -> StageChange:
    """Inside a transaction: run `step` (which fires a machine on `row`), compare-and-swap the result,
    write the one timeline entry, and queue what leaves the process. Raises `StaleRead` on a lost race.
    """
    before_stage, before_version, before_waiting = row.stage, row.version, row.waiting_on
    read = {"stage": row.stage, "needs_you": row.needs_you}  # as read, for the swap to leave alone
    event = step(row)
    now = clock()
    changes: dict[str, Any] = {
        "stage": row.stage,
        "waiting_on": row.waiting_on,
        "needs_you": needs_you(row.stage, row.waiting_on, row.job_state),
        "updated_at": now,
        **(extra_changes or {}),
    }
    if row.stage != before_stage:
        changes["stage_changed_at"] = now
    swapped = tickets.compare_and_swap(
        row, expected_stage=before_stage, expected_version=before_version, changes=changes, read=read
    )
    if not swapped:
        raise StaleRead(row.key)
    text = summary or f"{before_stage} → {row.stage} by {actor}"
    if reason:
        text += f": {reason}"
    entry_data = {"from": before_stage, "to": row.stage, "waiting_on": row.waiting_on, "actor": actor, "event": event}
    if reason:
        entry_data["reason"] = reason
    entry_data.update(data or {})
    entry = timeline.append(row.key, kind=kind, summary=text, at=now, data=entry_data)
    if row.stage in FINAL_STAGES and before_stage not in FINAL_STAGES:
        _queue_release_and_close(row, config=config, now=now, event=event)
    return StageChange(row, before_stage, row.stage, before_waiting, row.waiting_on, actor, now, event, entry)


def _queue_release_and_close(row: Ticket, *, config: Config, now: datetime, event: str) -> None:
    """A ticket just finished: the slot steward releases its slot, and a done PORT- ticket closes its tracker item."""
    if slots.claims_of_ticket(row.key):
        outbox.enqueue(SLOT_RELEASE_KIND, {"ticket": row.key, "reason": event}, at=now)
    if (
        row.stage == "done"
        and row.key.startswith(TRACKER_CLOSE_PREFIX)
        and row.tracker_issue_id
        and config.tracker_api_key
    ):
        outbox.enqueue(TRACKER_CLOSE_KIND, {"ticket": row.key, "issue_id": row.tracker_issue_id}, at=now)


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:64]
    return slug or "initiative"
