"""What a person saw, and whether it is still so: the strong entity tags (`ETag`) of the board's changeable
resources (a ticket, an initiative, the wallet, the writing automation setting, the router's policy) and the
`If-Match` check.

A change sent with the tag of what its sender saw is refused (`PreconditionFailed`, answered 412) when the
resource has changed since; the check runs inside the change's own transaction, on the row it locked, so no
change can slip in between. A change sent without `If-Match` works as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NoReturn

from domain.automation import AutomationState
from domain.clock import iso
from domain.errors import PreconditionFailed
from storage.models import Initiative, Ticket, TimelineEntry, Wallet

# `If-Match: *`: any current version (the resource exists).
ANY = "*"


def ticket_tag(row: Ticket) -> str:
    """A ticket's tag: its version, which every change of its row bumps (`storage.tickets.compare_and_swap`)."""
    return f'"v{row.version}"'


def _digest(*parts: Any) -> str:
    text = "\x1f".join("" if p is None else (iso(p) if isinstance(p, datetime) else str(p)) for p in parts)
    return '"h' + hashlib.sha256(text.encode()).hexdigest()[:20] + '"'


def initiative_tag(row: Initiative) -> str:
    """An initiative's tag: a digest of everything its representation shows, who changed it and when included."""
    return _digest(row.id, row.name, row.stage, row.updated_at, row.updated_by)


def wallet_tag(row: Wallet) -> str:
    return _digest(float(row.budget), float(row.spent), bool(row.locked), row.updated_at, row.updated_by)


def automation_tag(state: AutomationState) -> str:
    return _digest(state.enabled, state.updated_at, state.updated_by)


def matches(if_match: Sequence[str] | None, current: str) -> bool:
    """Whether a change may go ahead: no `If-Match` was sent, it is `*`, or one of its tags is `current`."""
    return if_match is None or ANY in if_match or current in if_match


def _refuse(*, tag: str, last: str, by: str | None, at: datetime | None, current: dict[str, Any]) -> NoReturn:
    """Refuse the change: `last` says what the resource's last change was (without who), `by` who made it."""
    last_change = last + (f" by {by}" if by else "")
    since = f" at {iso(at)}" if at else ""
    raise PreconditionFailed(
        f"{last_change}{since}, after the version you sent; nothing was changed. Read it again and decide anew.",
        etag=tag,
        last_change=last_change,
        changed_by=by,
        changed_at=at,
        current=current,
    )


def check_ticket(if_match: Sequence[str] | None, row: Ticket, newest_entry: Callable[[], TimelineEntry | None]) -> None:
    """Refuse a change of the ticket `row` (read for update) made from an older version of it; who changed it
    last is its newest timeline entry's actor (`newest_entry` is read only then)."""
    tag = ticket_tag(row)
    if matches(if_match, tag):
        return
    newest = newest_entry()
    data = (newest.data or {}) if newest else {}
    if newest is None:
        what = f"was changed to {row.stage}"
    elif newest.kind == "marked_done":
        what = "was marked done"
    elif newest.kind == "cancelled":
        what = "was cancelled"
    elif "to" in data:
        what = f"was moved to {row.stage}"
    elif newest.kind == "slot_claimed":
        what = f"claimed bay {data.get('slot')}"
    else:
        what = f"was changed ({newest.summary})"
    _refuse(
        tag=tag,
        last=f"{row.key} {what}",
        by=data.get("actor"),
        at=newest.at if newest else row.updated_at,
        current={"stage": row.stage, "waiting_on": row.waiting_on or None},
    )


def check_initiative(if_match: Sequence[str] | None, row: Initiative) -> None:
    tag = initiative_tag(row)
    if matches(if_match, tag):
        return
    _refuse(
        tag=tag,
        last=f"initiative {row.id} was set to {row.stage}",
        by=row.updated_by,
        at=row.updated_at,
        current={"stage": row.stage, "name": row.name},
    )


def check_wallet(if_match: Sequence[str] | None, row: Wallet) -> None:
    tag = wallet_tag(row)
    if matches(if_match, tag):
        return
    figures = f"budget {float(row.budget):g}, spent {float(row.spent):g}, {'locked' if row.locked else 'unlocked'}"
    _refuse(
        tag=tag,
        last=f"the wallet was set to {figures}",
        by=row.updated_by,
        at=row.updated_at,
        current={"budget": float(row.budget), "spent": float(row.spent), "locked": bool(row.locked)},
    )


def check_automation(if_match: Sequence[str] | None, state: AutomationState) -> None:
    tag = automation_tag(state)
    if matches(if_match, tag):
        return
    _refuse(
        tag=tag,
        last=f"writing automation was turned {'on' if state.enabled else 'off'}",
        by=state.updated_by,
        at=state.updated_at,
        current={"enabled": state.enabled},
    )


def policy_tag(version: str) -> str:
    """The router policy's tag: its version, a hash of the whole document (equal documents, equal tags)."""
    return f'"{version}"'


def check_policy(if_match: Sequence[str] | None, *, version: str, set_by: str | None, set_at: datetime) -> None:
    """Refuse a change of the router's policy made from another version than `version`, the one in force."""
    tag = policy_tag(version)
    if matches(if_match, tag):
        return
    _refuse(
        tag=tag,
        last=f"the router's policy was set to version {version}",
        by=set_by,
        at=set_at,
        current={"version": version},
    )
