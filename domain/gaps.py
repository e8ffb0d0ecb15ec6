"""The reconciliation ledger's vocabulary and rules (its rows: `storage/reconciliation.py`; who writes them: the
reconciler, `domain/ops/reconciler.py`, and the router, `domain/router/reconciliation.py` and `deliveries.py`): a
gap's states, which of them a delivery's arrival recovers, which the reconciler leaves alone, what a hook that
could not be read (or was read only in part) is entered as, and the `Gap` record a reader holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from storage import reconciliation
from storage.models import ReconciliationGap
from storage.reconciliation import GapRow


class GapState(StrEnum):
    """What became of a delivery a sender failed to make (the contract's `state`)."""

    REDELIVERED = "redelivered"  # asked for again; not arrived yet
    RECOVERED = "recovered"  # the delivery asked for again arrived and was recorded
    GIVEN_UP = "given_up"  # asked too often, refused for good, or a hook that needs a person's look
    REFUSED_BY_US = "refused_by_us"  # GitLab says the service refused it (a wrong token): never asked again


# A gap whose delivery then arrives is recovered: one asked for again, and one given up on (it came after all).
RECOVERABLE = frozenset({GapState.REDELIVERED, GapState.GIVEN_UP})
# Gaps the reconciler no longer asks about.
SETTLED = frozenset({GapState.GIVEN_UP, GapState.REFUSED_BY_US, GapState.RECOVERED})
# A hook that could not be read, or whose reading the page cap cut short, is one row of the hook (no guid) in this
# state: the decisions page lists it among what a person must look at.
HOOK_NEEDS_A_LOOK = GapState.GIVEN_UP
# How the ledger words a reading the page cap cut short (the contract: the ledger says `truncated`).
TRUNCATED = "truncated"
# The ledger's `hook` for the tracker, which has no hook the reconciler reads: its issues are.
TRACKER_HOOK = "issues"


@dataclass(frozen=True)
class Gap:
    """One entry of the ledger: a delivery `sender`'s hook says it failed to make (`guid` its id across attempts,
    `delivery` the sender's id of the latest attempt), or, with no guid, the hook itself (unreadable, truncated)."""

    id: int
    sender: str
    hook: str
    delivery: str | None
    guid: str | None
    event: str | None
    found_at: datetime
    updated_at: datetime
    state: GapState
    attempts: int
    detail: str

    @classmethod
    def of(cls, row: GapRow | ReconciliationGap) -> Gap:
        """The record of a ledger row, as the ledger's reads return it or the archivist's batch holds it."""
        return cls(
            id=row.id,
            sender=row.sender,
            hook=row.hook,
            delivery=row.delivery or None,
            guid=row.guid or None,
            event=row.event or None,
            found_at=row.found_at,
            updated_at=row.updated_at,
            state=GapState(row.state),
            attempts=row.attempts,
            detail=row.detail or "",
        )


def delivery_arrived(sender: str, guid: str, *, at: datetime) -> int:
    """In the unit of work that accepted `sender`'s delivery `guid`: its gaps (of any of the sender's hooks) that
    can be recovered are; how many."""
    return reconciliation.move_gaps_of(
        sender,
        guid,
        from_states=sorted(RECOVERABLE),
        to_state=GapState.RECOVERED,
        detail="the redelivery arrived and was recorded",
        at=at,
    )


def hook_needs_a_look(sender: str, hook: str, detail: str, *, at: datetime) -> None:
    """Enter (or bring up to date) the row of a hook that could not be read, or was read only in part."""
    reconciliation.hook_row(sender, hook, state=HOOK_NEEDS_A_LOOK, detail=detail[:1000], at=at)
