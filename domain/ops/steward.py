"""The slot steward and idle reclaim: wipe bays, release the slots of finished tickets.

Every wipe goes lease → wipe → finish. The lease (a compare-and-swap on the slot row, taken only while the
slot still qualifies) keeps a second wipe off the bay and keeps a new claim from landing on it mid-wipe, so a
bay is never wiped under a ticket that has just claimed it. The wipe itself runs outside any transaction (it
may take minutes). Finishing drops the claim only if it still binds the finished ticket (compare-and-swap),
clears the ticket's `assigned_slot` and writes one timeline entry. A failed wipe keeps the claim and says so
on the timeline: the next run tries again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import uuid4

from domain import units
from domain.clock import Clock, iso
from domain.config import Config
from domain.ops import runs
from domain.ops.runs import Trigger
from domain.units import StaleRead
from integrations import bays
from integrations.bays import WipeResult
from machines.stages import FINAL_STAGES
from storage import slots, tickets, timeline
from storage.db import connection, transaction
from storage.models import AgentRun, Slot, SlotClaim, Ticket

STEWARD_AGENT = "slot-steward"
RECLAIM_AGENT = "idle-reclaim"
IDLE_AFTER = timedelta(hours=24)
BATCH = 100
LEASE_MARGIN = timedelta(seconds=60)

RELEASED, WIPED, WIPE_FAILED, SKIPPED = "released", "wiped", "wipe_failed", "skipped"

Wiper = Callable[[str], WipeResult]
# Given the locked slot, its claim and the claim's ticket: None to go ahead, else why this slot is left alone.
Admission = Callable[[Slot, SlotClaim | None, Ticket | None], str | None]


@dataclass(frozen=True)
class SlotOutcome:
    """What happened to one slot in one run."""

    slot: str
    ticket: str | None
    outcome: str  # released, wiped, wipe_failed, skipped
    detail: str
    wipe: WipeResult | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"slot": self.slot, "ticket": self.ticket, "outcome": self.outcome, "detail": self.detail}
        if self.wipe is not None:
            out["wipe"] = self.wipe.as_dict()
        return out


@dataclass(frozen=True)
class BayReport:
    """A steward or idle-reclaim run: every slot it looked at, and its agent run."""

    outcomes: list[SlotOutcome]
    run: AgentRun
    extra: dict[str, Any] = field(default_factory=dict)

    def of(self, *kinds: str) -> list[SlotOutcome]:
        return [o for o in self.outcomes if o.outcome in kinds]

    @property
    def released(self) -> list[SlotOutcome]:
        return self.of(RELEASED)

    @property
    def failed(self) -> list[SlotOutcome]:
        return self.of(WIPE_FAILED)


class BayWipes:
    """Lease → wipe → finish for one slot; shared by the slot steward and idle reclaim."""

    def __init__(self, config: Config, clock: Clock, *, wiper: Wiper | None = None, owner: str | None = None):
        self.clock = clock
        self.wiper = wiper or (
            lambda slot: bays.wipe(slot, command=config.bay_wipe_command, timeout=config.bay_wipe_timeout)
        )
        self.lease = timedelta(seconds=config.bay_wipe_timeout) + LEASE_MARGIN
        self.owner = owner or f"wipe-{uuid4().hex[:12]}"

    def release_claim(self, slot: str, ticket: str, *, trigger: Trigger) -> SlotOutcome:
        """The steward's release: wipe the bay held by finished `ticket`, drop the claim, clear assigned_slot."""

        def admit(row: Slot, claim: SlotClaim | None, holder: Ticket | None) -> str | None:
            if claim is None or claim.ticket_key != ticket:
                return f"the claim of {ticket} is gone (released by another run)"
            if holder is None or holder.stage not in FINAL_STAGES:
                return f"{ticket} is no longer done or cancelled"
            return None

        return self._wipe(slot, admit, trigger=trigger, why="its ticket is finished")

    def reclaim_idle(self, slot: str, *, cutoff: datetime, trigger: Trigger) -> SlotOutcome:
        """Idle reclaim: wipe a bay idle since before `cutoff`, unless a live ticket holds it."""

        def admit(row: Slot, claim: SlotClaim | None, holder: Ticket | None) -> str | None:
            if row.last_activity_at >= cutoff:
                return "active again since the run started"
            if row.last_wiped_at is not None and row.last_wiped_at >= row.last_activity_at:
                return "already wiped since its last activity"
            if claim is not None and holder is not None and holder.stage not in FINAL_STAGES:
                # Wiping it would destroy the live ticket's work; a person unblocks or cancels the ticket.
                return f"held by {claim.ticket_key} ({holder.stage}): a live ticket's bay is not wiped"
            return None

        return self._wipe(slot, admit, trigger=trigger, why="idle for more than 24 hours")

    def _wipe(self, slot: str, admit: Admission, *, trigger: Trigger, why: str) -> SlotOutcome:
        def take() -> tuple[str | None, str | None]:
            now = self.clock()
            row = slots.get(slot, for_update=True)
            if row is None:
                return None, "no such slot"
            claim = slots.claim_of(slot)
            holder = tickets.get(claim.ticket_key) if claim is not None else None
            refusal = admit(row, claim, holder)
            if refusal is None and not slots.lease_wipe(slot, owner=self.owner, now=now, until=now + self.lease):
                refusal = "another wipe of this bay is in progress"
            return (claim.ticket_key if claim is not None else None), refusal

        ticket, refusal = units.run(take, what=f"leasing slot {slot} for a wipe")
        if refusal is not None:
            return SlotOutcome(slot, ticket, SKIPPED, refusal)

        result = self.wiper(slot)

        def finish() -> SlotOutcome:
            now = self.clock()
            # Ticket row before slot row, the order claim_slot locks them in.
            row = tickets.get(ticket, for_update=True) if ticket is not None else None
            slots.end_wipe(slot, owner=self.owner)
            if not result.ok:
                if ticket is not None:
                    timeline.append(
                        ticket,
                        kind="slot_wipe_failed",
                        summary=f"wipe of bay {slot} failed ({result.detail}); the slot stays claimed and the "
                        "next slot steward run tries again",
                        at=now,
                        data={"slot": slot, "wipe": result.as_dict(), **trigger.details()},
                    )
                return SlotOutcome(slot, ticket, WIPE_FAILED, result.detail, result)
            slots.mark_wiped(slot, at=now)
            if ticket is None:
                return SlotOutcome(slot, None, WIPED, f"bay wiped: {why}", result)
            if row is None or not slots.drop_claim(slot, ticket):
                return SlotOutcome(slot, ticket, WIPED, "bay wiped; the claim was already released", result)
            if row.assigned_slot == slot and not tickets.compare_and_swap(
                row,
                expected_stage=row.stage,
                expected_version=row.version,
                changes={"assigned_slot": None, "updated_at": now},
            ):
                raise StaleRead(ticket)
            wiped = "bay wiped" if result.ran else "wipe recorded only (no SVC_BAY_WIPE_COMMAND)"
            timeline.append(
                ticket,
                kind="slot_released",
                summary=f"slot {slot} released by the slot steward ({trigger.by}): {wiped}, claim dropped, "
                "assigned_slot cleared",
                at=now,
                data={"slot": slot, "reason": why, "wipe": result.as_dict(), **trigger.details()},
            )
            return SlotOutcome(slot, ticket, RELEASED, f"released: {wiped}", result)

        return units.run(finish, what=f"finishing the wipe of slot {slot}")


class _BayAgent:
    """What the slot steward and idle reclaim share: look at some slots, wipe what qualifies, record one run whose
    status and summary say what was done, what failed and (for idle reclaim) what was left alone."""

    agent_id: str
    # The outcomes this agent counts as done, its status when it did some, and when it found nothing to do.
    done: tuple[str, ...]
    done_status: str
    idle_status: str
    # The summary's words before the slots done, when none was, and after the slots whose wipe failed.
    done_words: str
    nothing_done: str
    failed_note: str = ""

    def __init__(self, wipes: BayWipes, clock: Clock):
        self.wipes = wipes
        self.clock = clock

    def _record(
        self, trigger: Trigger, started: datetime, outcomes: list[SlotOutcome], details: dict[str, Any]
    ) -> BayReport:
        done = [o for o in outcomes if o.outcome in self.done]
        failed = [o for o in outcomes if o.outcome == WIPE_FAILED]
        status = "WIPE_FAILED" if failed else (self.done_status if done else self.idle_status)
        parts = [f"{self.done_words} {_slots(done)}" if done else self.nothing_done]
        if failed:
            parts.append(f"wipe failed for {_slots(failed)}{self.failed_note}")
        parts += self._notes(outcomes)
        with transaction():
            run = runs.record(
                self.agent_id,
                trigger=trigger,
                started_at=started,
                finished_at=self.clock(),
                status=status,
                ok=not failed,
                summary="; ".join(parts)[:2000],
                details=details,
            )
        return BayReport(outcomes, run)

    def _notes(self, outcomes: list[SlotOutcome]) -> list[str]:
        """More the summary says about these outcomes (nothing, unless the agent says otherwise)."""
        return []


class SlotSteward(_BayAgent):
    """Wipes bays and drops slot claims of done or cancelled tickets (each pulse, mark_done, cancel, on request)."""

    agent_id = STEWARD_AGENT
    done = (RELEASED,)
    done_status, idle_status = "RELEASED", "NOTHING_TO_RELEASE"
    done_words, nothing_done = "released", "nothing to release"
    failed_note = " (claims kept; the next run tries again)"

    def run(self, trigger: Trigger, *, ticket: str | None = None) -> BayReport:
        """Release every claim of a finished ticket (only `ticket`'s when given) and record the run."""
        with connection():
            started = self.clock()
            claims = [
                (c.slot_name, c.ticket_key) for c in slots.claims_of_finished_tickets(limit=BATCH, ticket_key=ticket)
            ]
            outcomes = [self.wipes.release_claim(slot, key, trigger=trigger) for slot, key in claims]
            details: dict[str, Any] = {"slots": [o.as_dict() for o in outcomes]}
            if ticket is not None:
                details["ticket"] = ticket
            return self._record(trigger, started, outcomes, details)


class IdleReclaim(_BayAgent):
    """Wipes bays idle for more than 24 hours (04:00 UTC daily)."""

    agent_id = RECLAIM_AGENT
    done = (WIPED, RELEASED)
    done_status, idle_status = "WIPED", "NOTHING_IDLE"
    done_words, nothing_done = "wiped", "no idle bay to wipe"

    def run(self, trigger: Trigger) -> BayReport:
        with connection():
            started = self.clock()
            cutoff = started - IDLE_AFTER
            names = [s.name for s in slots.idle_since(cutoff, limit=BATCH)]
            outcomes = [self.wipes.reclaim_idle(name, cutoff=cutoff, trigger=trigger) for name in names]
            details = {"idle_before": iso(cutoff), "slots": [o.as_dict() for o in outcomes]}
            return self._record(trigger, started, outcomes, details)

    def _notes(self, outcomes: list[SlotOutcome]) -> list[str]:
        held = [o for o in outcomes if o.outcome == SKIPPED]
        return [f"left alone: {', '.join(f'{o.slot} ({o.detail})' for o in held)}"] if held else []


def _slots(outcomes: list[SlotOutcome]) -> str:
    return ", ".join(f"{o.slot} ({o.ticket})" if o.ticket else o.slot for o in outcomes)
