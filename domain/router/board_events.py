"""The board's own events: every stage change emits `state_changed`, `needs_you`, `cleared` or `stuck`, queued
for the router in the change's own transaction.

| change                                                             | kind            | from → to                  |
|--------------------------------------------------------------------|-----------------|----------------------------|
| to `blocked`                                                       | `stuck`         | stage → blocked            |
| to `done`, or off a human gate / a Needs-you wait                  | `cleared`       | stage (or wait) → stage    |
| onto a human gate, or starting to wait on a person                 | `needs_you`     | stage → gate or waiting_on |
| anything else (creation included)                                  | `state_changed` | stage → stage              |

A move to `execute` with nothing to wait on is eligible for a worker (suggested role coder). The actor is the
board's own (`svc:<name>`): a person signed in with basic credentials is a human; `ci`, the service's agents, the
jobs process and the router (the moves a ticket's pull request made) are the system; a worker account acts as an
agent. The system's and the agents' events are the service's own (`outcome: own`).

A stage change (a notify, a move) only adds one outbox row in its own transaction, so it stays as fast as it
was; the jobs process then routes the envelope (`route_event`, `jobs/handlers.py`). The row commits with the
change, so no event is lost; a delivery repeated after a crash is the same event id, so it is recorded once. The
price: the gates see the board as it is when the jobs process routes the event, a few seconds after the change.
"""

from __future__ import annotations

from typing import Any

from domain.board import StageChange
from domain.clock import iso
from domain.ops.schedules import AGENT_IDS
from domain.router.senders.payloads import build, ticket_subject
from machines.stages import HUMAN_GATE_STAGES, NEEDS_YOU_WAITING_ON, at_a_gate
from storage import outbox
from storage.models import Ticket

ROUTE_KIND = "route_event"

# Who changes the board without a person behind it: CI (the CI secret's identity) and the agents. A person
# signed in with basic credentials is human whatever the user name (the generated one is "svc").
SYSTEM_ACTORS = frozenset({"ci", "system", "jobs", "router", *AGENT_IDS})


def kind_of(change: StageChange) -> tuple[str, str | None, str | None]:
    """(kind, from, to) for one stage change."""
    before = at_a_gate(change.from_stage, change.from_waiting_on) if change.from_stage else False
    after = at_a_gate(change.to_stage, change.to_waiting_on)
    if change.to_stage == "blocked":
        return "stuck", change.from_stage, "blocked"
    if change.to_stage == "done" or (before and not after):
        origin = change.from_stage
        if change.from_stage not in HUMAN_GATE_STAGES and change.from_waiting_on in NEEDS_YOU_WAITING_ON:
            origin = change.from_waiting_on
        return "cleared", origin, change.to_stage
    if after and (not before or (change.to_stage, change.to_waiting_on) != (change.from_stage, change.from_waiting_on)):
        gate = change.to_stage if change.to_stage in HUMAN_GATE_STAGES else change.to_waiting_on
        return "needs_you", change.from_stage, gate
    return "state_changed", change.from_stage, change.to_stage


def actor_of(name: str, kind: str | None = None) -> dict[str, Any]:
    """The envelope's actor for a change made by `name`; `kind` when the change says it (a worker: `agent`)."""
    return {"kind": kind or ("system" if name in SYSTEM_ACTORS else "human"), "id": f"svc:{name}"}


def event_id_of(ticket: Ticket) -> str:
    # Every stage change bumps the ticket's version, so key and version name the change once and for all.
    return f"svc:{ticket.key}:v{ticket.version}"


def envelope_for(change: StageChange) -> dict[str, Any]:
    kind, from_state, to_state = kind_of(change)
    eligible = kind == "state_changed" and to_state == "execute" and not change.to_waiting_on
    return build(
        event_id=event_id_of(change.ticket),
        occurred_at=iso(change.at),
        source="svc",
        kind=kind,
        from_state=from_state,
        to_state=to_state,
        subject=ticket_subject(change.ticket),
        actor=actor_of(change.actor, change.actor_kind),
        eligible_for_worker=eligible,
        blocked_reason="await_ci" if to_state == "ci" else None,
        suggested_role="coder" if eligible else None,
    )


def queue_for_router(change: StageChange) -> None:
    """Stage listener: queue the change's envelope for the router, in the change's transaction."""
    outbox.enqueue(ROUTE_KIND, envelope_for(change), at=change.at)
