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
from storage import initiatives, jobs, tickets, wallet

# How far back a backtest's ledger of would-be fixer dispatches reaches (its correction of recorded counts).
RETRY_WINDOW = timedelta(days=1)
# The ticket's initiative as a decision's facts stand for it (they keep its stage, which is what the gate reads).
RECORDED_INITIATIVE = "its initiative"


@dataclass(frozen=True)
class TicketState:
    key: str
    stage: str
    initiative_id: str | None


class BoardView(Protocol):
    def ticket(self, key: str) -> TicketState | None: ...

    def initiative_stage(self, initiative_id: str) -> str | None: ...

    def wallet_locked(self) -> bool: ...

    def jobs_running(self) -> int:
        """Dispatch jobs running now (what a claim counts against the fleet size too)."""
        ...

    def fixer_dispatches(self, key: str, head_sha: str | None) -> int:
        """The ticket's fixer jobs since its last green pipeline, those for the failing head `head_sha` aside."""
        ...

    def age_seconds(self, occurred_at: str, now: datetime) -> float:
        """How old an event that occurred at `occurred_at` is at `now` (never below 0)."""
        ...


@dataclass(slots=True)
class Facts:
    """Exactly what the gates read from the board for one decision; None where no gate read it (a subject that
    is not a ticket has no stage; `fixer_dispatches` is counted only for an event a fixer rule matched)."""

    ticket_stage: str | None = None
    initiative_stage: str | None = None
    wallet_locked: bool = False
    jobs_running: int = 0
    fixer_dispatches: int | None = None
    age_seconds: float | None = None
    # Decisions recorded before schema version 10 kept the ticket's initiative (the gate now reads its stage only).
    ticket_initiative_id: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "ticket_stage": self.ticket_stage,
            "initiative_stage": self.initiative_stage,
            "wallet_locked": self.wallet_locked,
            "jobs_running": self.jobs_running,
            "fixer_dispatches": self.fixer_dispatches,
            "age_seconds": self.age_seconds,
        }

    @classmethod
    def from_dict(cls, document: dict[str, object]) -> Facts:
        """Recorded facts; older decisions' (before the loop) counted the fleet as `slots_held_by_others`."""
        running = document.get("jobs_running", document.get("slots_held_by_others", 0))
        age = document.get("age_seconds")
        initiative = document.get("ticket_initiative_id")
        return cls(
            ticket_stage=_text(document.get("ticket_stage")),
            initiative_stage=_text(document.get("initiative_stage")),
            wallet_locked=bool(document.get("wallet_locked", False)),
            jobs_running=int(running) if isinstance(running, int | float) else 0,
            fixer_dispatches=_whole(document.get("fixer_dispatches")),
            age_seconds=float(age) if isinstance(age, int | float) and not isinstance(age, bool) else None,
            ticket_initiative_id=_text(initiative),
        )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def event_age(occurred_at: str, now: datetime) -> float:
    """Seconds from `occurred_at` (the contract's ISO 8601 with a Z) to `now`; an event from the future is 0 old."""
    return max(0.0, (now - parse_timestamp(occurred_at)).total_seconds())


class RecordingBoardView:
    """Another view, read through, keeping what was read as the decision's facts (one decision: make one per
    evaluation). The facts are kept on the view itself, as `Facts` holds them: every event and replayed line
    makes one of these."""

    __slots__ = (
        "age_read",
        "fixer_dispatches_read",
        "initiative_stage_read",
        "inner",
        "jobs_running_read",
        "ticket_stage",
        "wallet_locked_read",
    )

    def __init__(self, inner: BoardView):
        self.inner = inner
        self.ticket_stage = self.initiative_stage_read = None
        self.wallet_locked_read = False
        self.jobs_running_read = 0
        self.fixer_dispatches_read = None
        self.age_read = None

    def facts_dict(self) -> dict[str, object]:
        """What the gates read, as `Facts.as_dict` shapes it (the decision's `facts`)."""
        return {
            "ticket_stage": self.ticket_stage,
            "initiative_stage": self.initiative_stage_read,
            "wallet_locked": self.wallet_locked_read,
            "jobs_running": self.jobs_running_read,
            "fixer_dispatches": self.fixer_dispatches_read,
            "age_seconds": self.age_read,
        }

    def ticket(self, key: str) -> TicketState | None:
        state = self.inner.ticket(key)
        if state is not None:
            self.ticket_stage = state.stage
        return state

    def initiative_stage(self, initiative_id: str) -> str | None:
        stage = self.initiative_stage_read = self.inner.initiative_stage(initiative_id)
        return stage

    def wallet_locked(self) -> bool:
        locked = self.wallet_locked_read = self.inner.wallet_locked()
        return locked

    def jobs_running(self) -> int:
        running = self.jobs_running_read = self.inner.jobs_running()
        return running

    def fixer_dispatches(self, key: str, head_sha: str | None) -> int:
        used = self.fixer_dispatches_read = self.inner.fixer_dispatches(key, head_sha)
        return used

    def age_seconds(self, occurred_at: str, now: datetime) -> float:
        age = self.age_read = self.inner.age_seconds(occurred_at, now)
        return age


class RecordedBoardView:
    """The board as one recorded decision saw it (its `facts`), for re-evaluating that decision.

    `more_fixer_dispatches(key, since)` corrects the recorded count of fixer dispatches by what a candidate
    policy did differently earlier in the same backtest (zero under the recorded policy), so the retry budget
    counts the candidate's own would-be dispatches, as `svc replay` does. The event's age is the recorded one: a
    backtest judges freshness at the decision's own time.
    """

    __slots__ = ("facts", "key", "more_fixer_dispatches", "now")

    def __init__(
        self,
        facts: Facts,
        key: str | None,
        more_fixer_dispatches: Callable[[str, datetime], int] | None = None,
        *,
        now: datetime | None = None,
    ):
        self.facts = facts
        self.key = key
        self.more_fixer_dispatches = more_fixer_dispatches
        self.now = now

    def ticket(self, key: str) -> TicketState | None:
        if self.facts.ticket_stage is None:
            return None
        return TicketState(key, self.facts.ticket_stage, self.facts.ticket_initiative_id or RECORDED_INITIATIVE)

    def initiative_stage(self, initiative_id: str) -> str | None:
        return self.facts.initiative_stage

    def wallet_locked(self) -> bool:
        return self.facts.wallet_locked

    def jobs_running(self) -> int:
        return self.facts.jobs_running

    def fixer_dispatches(self, key: str, head_sha: str | None) -> int:
        recorded = self.facts.fixer_dispatches or 0
        more = 0
        if self.more_fixer_dispatches is not None and self.now is not None:
            more = self.more_fixer_dispatches(key, self.now - RETRY_WINDOW)
        return max(0, recorded + more)

    def age_seconds(self, occurred_at: str, now: datetime) -> float:
        recorded = self.facts.age_seconds
        return recorded if recorded is not None else event_age(occurred_at, now)


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

    def jobs_running(self) -> int:
        return jobs.count_running()

    def fixer_dispatches(self, key: str, head_sha: str | None) -> int:
        return jobs.count_fixers_since_green(key, other_than_head=head_sha)

    def age_seconds(self, occurred_at: str, now: datetime) -> float:
        return event_age(occurred_at, now)


class UnmovedBoardView:
    """The live board, each fact read once in one unit of work that cannot change it: record-only routing (`svc
    import`) moves no ticket, queues no job and touches neither wallet nor initiative, so the board its batch reads
    stays as first read. Make one per attempt of the unit of work (inside it), never keep one across units."""

    __slots__ = ("_fixers", "_initiatives", "_running", "_tickets", "_wallet", "inner")

    def __init__(self, inner: BoardView):
        self.inner = inner
        self._tickets: dict[str, TicketState | None] = {}
        self._initiatives: dict[str, str | None] = {}
        self._fixers: dict[tuple[str, str | None], int] = {}
        self._wallet: bool | None = None
        self._running: int | None = None

    def ticket(self, key: str) -> TicketState | None:
        if key not in self._tickets:
            self._tickets[key] = self.inner.ticket(key)
        return self._tickets[key]

    def initiative_stage(self, initiative_id: str) -> str | None:
        if initiative_id not in self._initiatives:
            self._initiatives[initiative_id] = self.inner.initiative_stage(initiative_id)
        return self._initiatives[initiative_id]

    def wallet_locked(self) -> bool:
        if self._wallet is None:
            self._wallet = self.inner.wallet_locked()
        return self._wallet

    def jobs_running(self) -> int:
        if self._running is None:
            self._running = self.inner.jobs_running()
        return self._running

    def fixer_dispatches(self, key: str, head_sha: str | None) -> int:
        if (key, head_sha) not in self._fixers:
            self._fixers[(key, head_sha)] = self.inner.fixer_dispatches(key, head_sha)
        return self._fixers[(key, head_sha)]

    def age_seconds(self, occurred_at: str, now: datetime) -> float:
        return self.inner.age_seconds(occurred_at, now)


@dataclass
class SnapshotBoardView:
    """A board held in memory: what `svc replay` evaluates against, and what it updates as it goes.

    Replayed fixer dispatches count against the retry budget of later lines, as they would have live, until a
    replayed green pipeline about the ticket starts its count again. The jobs running are the board's when it was
    read (replay queues none).
    """

    tickets: dict[str, TicketState] = field(default_factory=dict)
    initiatives: dict[str, str] = field(default_factory=dict)
    locked: bool = False
    running: int = 0
    fixer_ledger: dict[str, deque[datetime]] = field(default_factory=dict)

    def ticket(self, key: str) -> TicketState | None:
        return self.tickets.get(key)

    def initiative_stage(self, initiative_id: str) -> str | None:
        return self.initiatives.get(initiative_id)

    def wallet_locked(self) -> bool:
        return self.locked

    def jobs_running(self) -> int:
        return self.running

    def fixer_dispatches(self, key: str, head_sha: str | None) -> int:
        return len(self.fixer_ledger.get(key) or ())

    def age_seconds(self, occurred_at: str, now: datetime) -> float:
        return event_age(occurred_at, now)

    def note_fixer_dispatch(self, key: str, at: datetime) -> None:
        self.fixer_ledger.setdefault(key, deque()).append(at)

    def note_green(self, key: str) -> None:
        """A pipeline passed for the ticket: its fixers are counted afresh from here."""
        self.fixer_ledger.pop(key, None)

    # -- files ---------------------------------------------------------------------------------------------

    def to_document(self, *, taken_at: datetime) -> dict[str, object]:
        return {
            "schema": "svc.board-snapshot/v0",
            "taken_at": iso(taken_at),
            "tickets": [
                {"key": t.key, "stage": t.stage, "initiative_id": t.initiative_id}
                for t in sorted(self.tickets.values(), key=lambda t: t.key)
            ],
            "initiatives": [{"id": i, "stage": s} for i, s in sorted(self.initiatives.items())],
            "wallet": {"locked": self.locked},
            "jobs_running": self.running,
            "fixer_dispatches": {k: [iso(t) for t in v] for k, v in sorted(self.fixer_ledger.items()) if v},
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> SnapshotBoardView:
        """Build from a snapshot document that passed `board-snapshot.json` (an older one's `fleet_holders`, the
        tickets that held a bay, stand for the jobs running)."""
        view = cls(
            tickets={t["key"]: TicketState(t["key"], t["stage"], t.get("initiative_id")) for t in document["tickets"]},
            initiatives={i["id"]: i["stage"] for i in document.get("initiatives", [])},
            locked=bool(document.get("wallet", {}).get("locked", False)),
            running=int(document.get("jobs_running", len(document.get("fleet_holders", [])))),
        )
        for key, times in document.get("fixer_dispatches", {}).items():
            view.fixer_ledger[key] = deque(sorted(parse_timestamp(t) for t in times))
        return view

    @classmethod
    def from_database(cls) -> SnapshotBoardView:
        """The live board, read once (call inside a connection)."""
        view = cls(
            tickets={key: TicketState(key, stage, initiative) for key, stage, initiative in tickets.stages()},
            initiatives=initiatives.stages(),
            locked=bool(wallet.get().locked),
            running=jobs.count_running(),
        )
        for key, times in jobs.fixer_times_since_green().items():
            view.fixer_ledger[key] = deque(times)
        return view


def dump_snapshot(view: SnapshotBoardView, *, taken_at: datetime) -> str:
    return json.dumps(view.to_document(taken_at=taken_at), indent=2)
