"""What every normalizer shares: building the envelope, reading payload fields, finding the ticket key."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any

from contracts import ContractViolation, Violation
from contracts.envelope import ENVELOPE_VERSION
from svc.clock import iso


class Unmappable(Exception):
    """A genuine delivery that maps to no event (a ping, an action the router does not route): nothing is recorded."""


class PayloadError(ContractViolation):
    """The payload lacks what its source always sends: the delivery is refused (422), nothing is recorded."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__("webhook payload", [Violation(path, message)])


# A ticket key inside a branch name (`port-12-login`, `feature/PORT-12`) or a title (`[PORT-12] Login`).
_KEY_IN_BRANCH = re.compile(r"(?:^|[/_])([A-Za-z][A-Za-z0-9]*-[0-9]+)(?=$|[-_/.])")
_KEY_IN_TITLE = re.compile(r"\b([A-Z][A-Z0-9]*-[0-9]+)\b")
# Branch-naming words that come before a number without naming a ticket (`release-2026`, `renovate-12`).
_NOT_PROJECTS = frozenset(
    {"release", "hotfix", "feature", "fix", "bugfix", "chore", "renovate", "dependabot", "revert"}
)
_DELIVERY_ID = re.compile(r"^[\x21-\x7e]{1,150}$")


def ticket_key_in(*, branch: str | None = None, title: str | None = None) -> str | None:
    """The board ticket a PR or pipeline is about: named in its branch, else in its title."""
    if branch:
        for found in _KEY_IN_BRANCH.finditer(branch):
            if found.group(1).split("-")[0].lower() not in _NOT_PROJECTS:
                return found.group(1).upper()
    if title:
        found = _KEY_IN_TITLE.search(title)
        if found:
            return found.group(1)
    return None


def event_id(prefix: str, delivery: str | None, raw: bytes) -> str:
    """`<prefix>:<delivery id>`, so a redelivery is the same event; without a usable delivery id, the body's
    hash (a redelivery carries the same bytes)."""
    if delivery and _DELIVERY_ID.match(delivery):
        return f"{prefix}:{delivery}"
    return f"{prefix}:sha256-{hashlib.sha256(raw).hexdigest()[:48]}"


def need(document: Any, *path: str | int, kind: type | tuple[type, ...] = str) -> Any:
    """`document[path...]`, which must exist with type `kind`, else `PayloadError` at its JSON pointer."""
    node = document
    for depth, step in enumerate(path):
        pointer = "/" + "/".join(str(p) for p in path[: depth + 1])
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                raise PayloadError(pointer, "is required")
        elif not isinstance(node, dict) or step not in node:
            raise PayloadError(pointer, "is required")
        node = node[step]
    if not isinstance(node, kind) or (kind is int and isinstance(node, bool)):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise PayloadError("/" + "/".join(str(p) for p in path), f"must be of type {names}")
    return node


def maybe(document: Any, *path: str | int) -> Any:
    """`document[path...]` or None when any step is missing."""
    node = document
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                return None
        elif not isinstance(node, dict) or step not in node:
            return None
        node = node[step]
    return node


_GITLAB_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d+)?)\s*(UTC|Z|[+-]\d{2}:?\d{2})?$")


def utc_timestamp(text: Any, *, path: str) -> str:
    """A source's timestamp (`2026-11-20T10:00:00Z`, `2026-11-20 10:00:00 UTC`, `... +0100`) in the contract's
    form, ISO 8601 UTC with a Z."""
    if isinstance(text, str):
        found = _GITLAB_TIME.match(text.strip())
        if found:
            day, clock, zone = found.groups()
            if zone in (None, "UTC", "Z"):
                zone = "+00:00"
            elif ":" not in zone:
                zone = zone[:3] + ":" + zone[3:]
            try:
                return iso(datetime.fromisoformat(f"{day}T{clock}{zone}").astimezone(UTC))
            except ValueError:
                pass
    raise PayloadError(path, f"is not a timestamp: {text!r}")


def from_epoch_ms(value: Any, *, path: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return iso(datetime.fromtimestamp(value / 1000, UTC))
    raise PayloadError(path, f"is not a Unix time in milliseconds: {value!r}")


def build(
    *,
    event_id: str,
    occurred_at: str,
    source: str,
    kind: str,
    from_state: str | None,
    to_state: str | None,
    subject: dict[str, Any],
    actor: dict[str, Any],
    eligible_for_worker: bool,
    blocked_reason: str | None = None,
    suggested_role: str | None = None,
    forge: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One envelope, every field the contract names, in its order."""
    envelope: dict[str, Any] = {
        "schema": ENVELOPE_VERSION,
        "id": event_id,
        "occurred_at": occurred_at,
        "source": source,
        "transition": {"kind": kind, "from": from_state, "to": to_state},
        "subject": subject,
        "actor": {"roles": [], **actor},
        "dispatch_hints": {
            "eligible_for_worker": eligible_for_worker,
            "blocked_reason": blocked_reason,
            "suggested_role": suggested_role,
        },
    }
    if forge is not None:
        envelope["forge"] = forge
    return envelope


def repo_subject(key: str | None, *, repo: str | None, fallback_type: str, fallback_id: str) -> dict[str, Any]:
    """The ticket the forge object names, else the forge object itself (which no gate lets through)."""
    subject: dict[str, Any] = {"type": "ticket", "id": key} if key else {"type": fallback_type, "id": fallback_id}
    if repo:
        subject["repo"] = repo
    return subject
