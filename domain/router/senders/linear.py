"""Linear (the tracker), inbound (outbound: `integrations/linear.py`): Issue webhooks that change the issue's state
become `state_changed` (source `tracker`).

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

A delivery is Linear's when `Linear-Signature` is the hex HMAC-SHA256 of its raw body under the tracker secret,
and the `webhookTimestamp` it signed is within the replay window of this server's clock. Its event id is
`linear:<Linear-Delivery>`; it is the same event as another when the signed body is the same apart from its
`webhookTimestamp` (Linear signs a fresh one on each attempt). Linear-Delivery is not signed.

What we send to Linear (closing an issue) is `integrations/linear.py`: the same sender, the other direction.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from domain.errors import StaleDelivery
from domain.idempotency import request_hash
from domain.router.board_view import TicketState
from domain.router.senders.payloads import (
    Delivery,
    Identity,
    PayloadError,
    Unmappable,
    build,
    event_id,
    from_epoch_ms,
    maybe,
    need,
    usable_delivery_id,
    utc_timestamp,
)
from domain.router.senders.signatures import hmac_sha256_hex, same_secret

SIGNATURE_HEADER = "Linear-Signature"
# The body member in which Linear signs the time of each attempt (milliseconds since the epoch).
TIMESTAMP = "webhookTimestamp"

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


def verify(signature: str | None, raw: bytes, secret: str | None) -> bool:
    """`Linear-Signature: <hex>`, the HMAC-SHA256 of the raw body under `secret`."""
    if not secret or signature is None:
        return False
    return same_secret(signature.strip().lower(), hmac_sha256_hex(secret, raw))


def check_fresh(document: Any, *, now: datetime, tolerance: float) -> None:
    """Refuse (`StaleDelivery`) a delivery whose signed `webhookTimestamp` is further than `tolerance` seconds from
    `now`: a captured delivery replayed later, or a clock far off. Linear's own SDK allows a minute."""
    stamp = document.get(TIMESTAMP) if isinstance(document, dict) else None
    if stamp is None:
        raise StaleDelivery(
            f"the delivery carries no signed {TIMESTAMP}: Linear signs the time into every delivery, "
            "and without one it cannot be told from a replay"
        )
    if not isinstance(stamp, int | float) or isinstance(stamp, bool) or not 0 < stamp < 1e15:
        raise StaleDelivery(f"the delivery's {TIMESTAMP} is not a Unix time in milliseconds: {stamp!r}")
    skew = stamp / 1000 - now.timestamp()
    if abs(skew) > tolerance:
        when = "ahead of" if skew > 0 else "behind"
        raise StaleDelivery(
            f"the delivery's signed {TIMESTAMP} is {abs(skew):.0f} s {when} this server's clock, outside "
            f"the replay window of {tolerance:g} s (SVC_WEBHOOK_TOLERANCE_SECONDS): refused as a possible replay"
        )


def identify(delivery: Delivery) -> Identity:
    """The event id (`linear:<Linear-Delivery>`) and the same-event key (the signed body without its time)."""
    document = delivery.document
    if isinstance(document, dict) and TIMESTAMP in document:
        document = {k: v for k, v in document.items() if k != TIMESTAMP}
    given = usable_delivery_id(delivery.header("linear-delivery"))
    return Identity(event_id("linear", given, delivery.raw), f"linear:sha256-{request_hash(document)}")


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
