"""The dispatch switch (its row: `storage/settings.py`, key "dispatch"): one operator's pause over all live dispatch,
with why, who and when. While it is paused, a live rule's passing decision queues its job `held` (`"dispatched":
false, "held": true`), no worker claims a job, and forge writes wait (`forge.state: "held"`); resuming queues the held
jobs, oldest first, and lets the writes go (`Dispatch.set_switch`, one unit of work). The board says so on every
page.

It is a setting, not a stage of anything: like the wallet's lock, a change writes no timeline entry and posts
nothing to chat; the row keeps who changed it last and when."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from contracts import ContractViolation, Violation
from storage import settings

SETTING_KEY = "dispatch"
CONTRACT = "router-dispatch-put.json"


@dataclass(frozen=True)
class Switch:
    """Whether dispatch is paused, the reason given for the last pause or resume, who gave it and when (None before
    anyone has)."""

    paused: bool
    reason: str | None
    changed_by: str | None
    changed_at: datetime | None


NEVER_SET = Switch(paused=False, reason=None, changed_by=None, changed_at=None)


def read() -> Switch:
    """The switch as it stands (not paused when never set). Call inside a unit of work or a connection."""
    row = settings.get(SETTING_KEY)
    if row is None:
        return NEVER_SET
    value = row.value or {}
    return Switch(bool(value.get("paused", False)), value.get("reason"), row.updated_by, row.updated_at)


def checked_reason(*, paused: bool, reason: str | None) -> str | None:
    """The reason as kept (trimmed; None when empty); a pause without one is refused (`ContractViolation`)."""
    reason = reason.strip() if reason is not None else None
    if paused and not reason:
        raise ContractViolation(CONTRACT, [Violation("/reason", "a pause needs a reason: it is shown on every page")])
    return reason or None


def write(*, paused: bool, reason: str | None, actor: str | None, at: datetime) -> Switch:
    """Inside a unit of work: set the switch; what it is then."""
    settings.put(SETTING_KEY, {"paused": paused, "reason": reason}, at=at, by=actor)
    return Switch(paused, reason, actor, at)
