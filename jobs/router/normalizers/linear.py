"""Linear (the tracker): Issue webhooks that change the issue's state become `state_changed` (source `tracker`).

Linear states map to board stages by name where the name is one of Linear's defaults, else by the state's
type: triage/backlog → `agreement`, Todo/unstarted → `queued`, In Progress/started → `execute`,
In Review → `human_test`, Done/completed → `done`, Canceled/Duplicate/canceled → `cancelled`.

The subject is the board ticket whose `tracker_issue_id` is the issue's id (or its identifier), else the
issue identifier itself (`ENG-123`, a valid ticket key). Current deliveries carry `data.identifier`; older ones
(2023) do not, and the identifier is made from `data.team.key` and `data.number`, or read from the issue's url
(`.../issue/ENG-123/...`). `from` is that board ticket's current stage (a Linear payload names only the previous
state's id). Current deliveries carry `actor` (a user is `human`, an OAuth application or integration an
`agent`, id `linear:<actor id>`); older ones carry none, which maps to actor kind `unknown`, which the
authorization gate fails closed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from jobs.router.board_view import TicketState
from jobs.router.normalizers.envelope import (
    PayloadError,
    Unmappable,
    build,
    from_epoch_ms,
    maybe,
    need,
    utc_timestamp,
)

# An issue identifier is its team's key and its number: `PORT-12`.
_IDENTIFIER = re.compile(r"^[A-Z][A-Z0-9]*-[0-9]+$")
_ISSUE_URL = re.compile(r"/issue/([A-Z][A-Z0-9]*-[0-9]+)(?:/|$|[?#])")

# (issue id, identifier) -> the board ticket tracking that issue, if any
TicketLookup = Callable[[str, str], TicketState | None]

_BY_NAME = {
    "triage": "agreement",
    "backlog": "agreement",
    "todo": "queued",
    "in progress": "execute",
    "in review": "human_test",
    "done": "done",
    "canceled": "cancelled",
    "cancelled": "cancelled",
    "duplicate": "cancelled",
}
_BY_TYPE = {
    "triage": "agreement",
    "backlog": "agreement",
    "unstarted": "queued",
    "started": "execute",
    "completed": "done",
    "canceled": "cancelled",
}


def stage_for(state: dict[str, Any]) -> str | None:
    name = maybe(state, "name")
    if isinstance(name, str) and name.strip().lower() in _BY_NAME:
        return _BY_NAME[name.strip().lower()]
    return _BY_TYPE.get(maybe(state, "type"))


def actor_of(actor: Any) -> dict[str, Any]:
    ident = maybe(actor, "id")
    if not isinstance(ident, str) or not ident:
        return {"kind": "unknown", "id": None}
    # A person acting in Linear is a user; OAuth applications and integrations are agents.
    kind = "human" if maybe(actor, "type") in (None, "user") else "agent"
    return {"kind": kind, "id": f"linear:{ident}"}


def identifier_of(payload: dict[str, Any]) -> str:
    """The issue's identifier (`PORT-12`): `data.identifier`, which current deliveries carry; else, as in older
    deliveries, the team's key with the issue's number, or the `/issue/PORT-12/` in its url."""
    identifier = maybe(payload, "data", "identifier")
    if isinstance(identifier, str) and _IDENTIFIER.match(identifier):
        return identifier
    team_key, number = maybe(payload, "data", "team", "key"), maybe(payload, "data", "number")
    if isinstance(team_key, str) and isinstance(number, int) and not isinstance(number, bool) and number > 0:
        made = f"{team_key}-{number}"
        if _IDENTIFIER.match(made):
            return made
    for url in (maybe(payload, "url"), maybe(payload, "data", "url")):
        found = _ISSUE_URL.search(url) if isinstance(url, str) else None
        if found:
            return found.group(1)
    if identifier is not None:
        raise PayloadError("/data/identifier", f"is not a Linear issue identifier: {identifier!r}")
    raise PayloadError("/data/identifier", "is required (or data.team.key with data.number, or a url naming the issue)")


def normalize(event_id: str, payload: Any, lookup: TicketLookup | None = None) -> dict[str, Any]:
    """The envelope for one Linear webhook delivery."""
    if not isinstance(payload, dict):
        raise PayloadError("", "a Linear webhook body is a JSON object")
    if maybe(payload, "type") != "Issue":
        raise Unmappable(f"Linear {maybe(payload, 'type') or '(no type)'} webhooks are not routed")
    action = need(payload, "action")
    if action == "update" and "stateId" not in (maybe(payload, "updatedFrom") or {}):
        raise Unmappable("an issue update that does not change its state is not routed")
    if action not in {"create", "update"}:
        raise Unmappable(f"Issue action {action} is not routed")
    issue_id = need(payload, "data", "id")
    identifier = identifier_of(payload)
    state = need(payload, "data", "state", kind=dict)
    to_stage = stage_for(state)
    if to_stage is None:
        raise PayloadError("/data/state", f"is not a Linear workflow state: {state!r}")
    ticket = lookup(issue_id, identifier) if lookup is not None else None
    if "createdAt" in payload:
        occurred = utc_timestamp(payload["createdAt"], path="/createdAt")
    else:
        occurred = from_epoch_ms(maybe(payload, "webhookTimestamp"), path="/webhookTimestamp")
    subject: dict[str, Any] = {
        "type": "ticket",
        "id": ticket.key if ticket else identifier,
        "tracker_issue_id": issue_id,
    }
    if ticket is not None and ticket.initiative_id:
        subject["initiative_id"] = ticket.initiative_id
    to_execute = to_stage == "execute"
    return build(
        event_id=event_id,
        occurred_at=occurred,
        source="tracker",
        kind="state_changed",
        from_state=ticket.stage if ticket is not None and action == "update" else None,
        to_state=to_stage,
        subject=subject,
        actor=actor_of(maybe(payload, "actor")),
        eligible_for_worker=to_execute,
        suggested_role="coder" if to_execute else None,
    )
