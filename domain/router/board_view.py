"""What the gates may know about the board, from the live database, a snapshot held in memory, or the facts a
decision recorded.

The gates read the board only through `BoardView`, so the live router (inside the unit of work that records
the decision), `svc replay` (offline, against a snapshot) and `svc backtest` (each recorded decision against the
board as it was then, `RecordedBoardView`) run the very same gate functions. The live router reads through a
`RecordingBoardView`, which keeps what the gates read as the decision's `facts`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from domain.clock import iso, parse_timestamp
from storage import decisions, initiatives, slots, tickets, wallet

# Stages in which a ticket holding a slot counts against the fleet.
FLEET_STAGES = ("execute", "ci")
RETRY_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class TicketState:
    key: str
    stage: str
    initiative_id: str | None


class BoardView(Protocol):
    def ticket(self, key: str) -> TicketState | None: ...

    def initiative_stage(self, initiative_id: str) -> str | None: ...

    def wallet_locked(self) -> bool: ...

    def slots_held_by_others(self, key: str | None) -> int:
        """Tickets other than `key` that hold a slot while in `execute` or `ci`."""
        ...

    def fixer_dispatches(self, key: str, since: datetime) -> int: ...


@dataclass(slots=True)
class Facts:
    """Exactly what the gates read from the board for one decision; None where no gate read it (a subject that
    is not a ticket has no stage; `fixer_dispatches` is counted only for an event a fixer rule matched)."""

    ticket_stage: str | None = None
    ticket_initiative_id: str | None = None
    initiative_stage: str | None = None
    wallet_locked: bool = False
    slots_held_by_others: int = 0
    fixer_dispatches: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ticket_stage": self.ticket_stage,
            "ticket_initiative_id": self.ticket_initiative_id,
            "initiative_stage": self.initiative_stage,
            "wallet_locked": self.wallet_locked,
            "slots_held_by_others": self.slots_held_by_others,
            "fixer_dispatches": self.fixer_dispatches,
        }

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Facts:
        return cls(
            ticket_stage=document.get("ticket_stage"),
            ticket_initiative_id=document.get("ticket_initiative_id"),
            initiative_stage=document.get("initiative_stage"),
            wallet_locked=bool(document.get("wallet_locked", False)),
            slots_held_by_others=int(document.get("slots_held_by_others", 0)),
            fixer_dispatches=document.get("fixer_dispatches"),
        )


class RecordingBoardView:
    """Another view, read through, keeping what was read as the decision's facts (one decision: make one per
    evaluation). The facts are kept on the view itself, as `Facts` holds them: every event and replayed line
    makes one of these."""

    __slots__ = (
        "fixer_dispatches_read",
        "initiative_stage_read",
        "inner",
        "slots_held_read",
        "ticket_initiative_id",
        "ticket_stage",
        "wallet_locked_read",
    )

    def __init__(self, inner: BoardView):
        self.inner = inner
        self.ticket_stage = self.ticket_initiative_id = self.initiative_stage_read = None
        self.wallet_locked_read = False
        self.slots_held_read = 0
        self.fixer_dispatches_read = None

    def facts_dict(self) -> dict[str, Any]:
        """What the gates read, as `Facts.as_dict` shapes it (the decision's `facts`)."""
        return {
            "ticket_stage": self.ticket_stage,
            "ticket_initiative_id": self.ticket_initiative_id,
            "initiative_stage": self.initiative_stage_read,
            "wallet_locked": self.wallet_locked_read,
            "slots_held_by_others": self.slots_held_read,
            "fixer_dispatches": self.fixer_dispatches_read,
        }

    def ticket(self, key: str) -> TicketState | None:
        state = self.inner.ticket(key)
        if state is not None:
            self.ticket_stage = state.stage
            self.ticket_initiative_id = state.initiative_id
        return state

    def initiative_stage(self, initiative_id: str) -> str | None:
        stage = self.initiative_stage_read = self.inner.initiative_stage(initiative_id)
        return stage

    def wallet_locked(self) -> bool:
        locked = self.wallet_locked_read = self.inner.wallet_locked()
        return locked

    def slots_held_by_others(self, key: str | None) -> int:
        held = self.slots_held_read = self.inner.slots_held_by_others(key)
        return held

    def fixer_dispatches(self, key: str, since: datetime) -> int:
        used = self.fixer_dispatches_read = self.inner.fixer_dispatches(key, since)
        return used


class RecordedBoardView:
    """The board as one recorded decision saw it (its `facts`), for re-evaluating that decision.

    `more_fixer_dispatches(key, since)` corrects the recorded count of fixer dispatches by what a candidate
    policy did differently earlier in the same backtest (zero under the recorded policy), so the retry budget
    counts the candidate's own would-be dispatches, as `svc replay` does.
    """

    __slots__ = ("facts", "key", "more_fixer_dispatches")

    def __init__(
        self,
        facts: Facts,
        key: str | None,
        more_fixer_dispatches: Callable[[str, datetime], int] | None = None,
    ):
        self.facts = facts
        self.key = key
        self.more_fixer_dispatches = more_fixer_dispatches

    def ticket(self, key: str) -> TicketState | None:
        if self.facts.ticket_stage is None:
            return None
        return TicketState(key, self.facts.ticket_stage, self.facts.ticket_initiative_id)

    def initiative_stage(self, initiative_id: str) -> str | None:
        return self.facts.initiative_stage

    def wallet_locked(self) -> bool:
        return self.facts.wallet_locked

    def slots_held_by_others(self, key: str | None) -> int:
        return self.facts.slots_held_by_others

    def fixer_dispatches(self, key: str, since: datetime) -> int:
        recorded = self.facts.fixer_dispatches or 0
        more = self.more_fixer_dispatches(key, since) if self.more_fixer_dispatches is not None else 0
        return max(0, recorded + more)


class LiveBoardView:
    """The board as it is now, read inside the caller's transaction."""

    def ticket(self, key: str) -> TicketState | None:
        row = tickets.get(key)
        return TicketState(row.key, row.stage, row.initiative_id) if row is not None else None

    def initiative_stage(self, initiative_id: str) -> str | None:
        row = initiatives.get(initiative_id)
        return row.stage if row is not None else None

    def wallet_locked(self) -> bool:
        return bool(wallet.get().locked)

    def slots_held_by_others(self, key: str | None) -> int:
        return slots.count_claimed_in_stages(list(FLEET_STAGES), excluding_ticket=key)

    def fixer_dispatches(self, key: str, since: datetime) -> int:
        return decisions.fixer_dispatches_since(key, since)


@dataclass
class SnapshotBoardView:
    """A board held in memory: what `svc replay` evaluates against, and what it updates as it goes.

    Replayed fixer dispatches count against the retry budget of later lines, as they would have live; the
    ledger keeps only the last day per ticket, so memory does not grow with the length of the file.
    """

    tickets: dict[str, TicketState] = field(default_factory=dict)
    initiatives: dict[str, str] = field(default_factory=dict)
    locked: bool = False
    fleet_holders: set[str] = field(default_factory=set)
    fixer_ledger: dict[str, deque[datetime]] = field(default_factory=dict)

    def ticket(self, key: str) -> TicketState | None:
        return self.tickets.get(key)

    def initiative_stage(self, initiative_id: str) -> str | None:
        return self.initiatives.get(initiative_id)

    def wallet_locked(self) -> bool:
        return self.locked

    def slots_held_by_others(self, key: str | None) -> int:
        return len(self.fleet_holders) - (1 if key in self.fleet_holders else 0)

    def fixer_dispatches(self, key: str, since: datetime) -> int:
        ledger = self.fixer_ledger.get(key)
        if not ledger:
            return 0
        while ledger and ledger[0] < since:
            ledger.popleft()
        return len(ledger)

    def note_fixer_dispatch(self, key: str, at: datetime) -> None:
        self.fixer_ledger.setdefault(key, deque()).append(at)

    # -- files ---------------------------------------------------------------------------------------------

    def to_document(self, *, taken_at: datetime) -> dict[str, Any]:
        return {
            "schema": "svc.board-snapshot/v0",
            "taken_at": iso(taken_at),
            "tickets": [
                {"key": t.key, "stage": t.stage, "initiative_id": t.initiative_id}
                for t in sorted(self.tickets.values(), key=lambda t: t.key)
            ],
            "initiatives": [{"id": i, "stage": s} for i, s in sorted(self.initiatives.items())],
            "wallet": {"locked": self.locked},
            "fleet_holders": sorted(self.fleet_holders),
            "fixer_dispatches": {k: [iso(t) for t in v] for k, v in sorted(self.fixer_ledger.items()) if v},
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> SnapshotBoardView:
        """Build from a snapshot document that passed `board-snapshot.json`."""
        view = cls(
            tickets={t["key"]: TicketState(t["key"], t["stage"], t.get("initiative_id")) for t in document["tickets"]},
            initiatives={i["id"]: i["stage"] for i in document.get("initiatives", [])},
            locked=bool(document.get("wallet", {}).get("locked", False)),
            fleet_holders=set(document.get("fleet_holders", [])),
        )
        for key, times in document.get("fixer_dispatches", {}).items():
            view.fixer_ledger[key] = deque(sorted(_parse(t) for t in times))
        return view

    @classmethod
    def from_database(cls, *, now: datetime) -> SnapshotBoardView:
        """The live board, read once (call inside a connection)."""
        view = cls(
            tickets={key: TicketState(key, stage, initiative) for key, stage, initiative in tickets.stages()},
            initiatives=initiatives.stages(),
            locked=bool(wallet.get().locked),
        )
        view.fleet_holders = {
            key for key in slots.claiming_tickets() if key in view.tickets and view.tickets[key].stage in FLEET_STAGES
        }
        for key, times in decisions.fixer_dispatch_times_since(now - RETRY_WINDOW).items():
            view.fixer_ledger[key] = deque(times)
        return view


def _parse(text: str) -> datetime:
    return parse_timestamp(text)


def dump_snapshot(view: SnapshotBoardView, *, taken_at: datetime) -> str:
    return json.dumps(view.to_document(taken_at=taken_at), indent=2)
