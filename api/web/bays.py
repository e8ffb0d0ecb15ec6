"""How a bay (slot) reads on the web board (`integrations/bays.py` wipes them): free or held and by which ticket, idle
for how long, a release in progress in words — queued for the slot steward (its ticket is finished) or being
wiped right now — and the dispatch job running in it (the workers panel is this one): its ticket, how long it has run,
its worker's last heartbeat."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from domain.board import SlotView
from domain.dispatch.panel import Running
from machines.stages import FINAL_STAGES
from storage.slots import being_wiped

FREE, HELD, RELEASING, WIPING = "free", "held", "releasing", "wiping"
SYMBOLS = {FREE: "○", HELD: "●", RELEASING: "↻", WIPING: "↻"}


@dataclass(frozen=True)
class BayView:
    name: str
    state: str  # free, held, releasing (its ticket is finished; the steward will wipe it), wiping
    words: str
    ticket: str | None
    ticket_stage: str | None
    claimed_at: datetime | None
    last_activity_at: datetime
    last_wiped_at: datetime | None
    # The dispatch job running in the bay, when one is.
    job: Running | None = None

    @property
    def symbol(self) -> str:
        return SYMBOLS[self.state]

    @property
    def free(self) -> bool:
        return self.state == FREE


def describe(view: SlotView, now: datetime, running: Running | None = None) -> BayView:
    slot, claim = view.slot, view.claim
    ticket = claim.ticket if claim is not None else None
    stage = ticket.stage if ticket is not None else None
    if being_wiped(slot, now=now):
        state, words = WIPING, "release in progress: the bay is being wiped"
    elif claim is not None and stage in FINAL_STAGES:
        state, words = RELEASING, f"release in progress: {claim.ticket_key} is {stage}; the slot steward wipes it next"
    elif claim is not None and running is not None:
        state, words = HELD, f"{running.job.role} job {running.job.id} running for {claim.ticket_key}"
    elif claim is not None:
        state, words = HELD, f"held by {claim.ticket_key}"
    else:
        state, words = FREE, "free"
    return BayView(
        name=slot.name,
        state=state,
        words=words,
        ticket=claim.ticket_key if claim is not None else None,
        ticket_stage=stage,
        claimed_at=claim.claimed_at if claim is not None else None,
        last_activity_at=slot.last_activity_at,
        last_wiped_at=slot.last_wiped_at,
        job=running,
    )
