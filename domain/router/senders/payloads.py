"""What every sender shares: the delivery and its identity, reading payload fields, finding the ticket key,
building the envelope."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from contracts import ContractViolation, Violation
from contracts.envelope import ENVELOPE_VERSION
from domain.clock import iso, parse_timestamp
from storage.models import Ticket


@dataclass(frozen=True)
class Delivery:
    """One webhook delivery, its credentials already checked: `sender` (`github`, `gitlab` or `linear`) is the
    one whose credential verified it (or, for a CI report under the CI secret, whose shape its body has)."""

    endpoint: str  # forge, ci or tracker
    sender: str
    headers: Mapping[str, str]  # names lower-cased
    raw: bytes
    document: Any

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def delivery_id(self) -> str | None:
        """The sender's name for this delivery, as a person finds it in the sender's delivery log."""
        return (
            self.header("x-github-delivery")
            or self.header("idempotency-key")
            or self.header("x-gitlab-event-uuid")
            or self.header("linear-delivery")
        )


@dataclass(frozen=True)
class Identity:
    """`event_id` names the event in decisions (the sender's own name for the delivery, so a person finds it in
    the sender's delivery log); `same_event` decides what is a redelivery of it."""

    event_id: str
    same_event: str


class Unmappable(Exception):
    """A genuine delivery that maps to no event (a ping, an action the router does not route): nothing is recorded."""


class PayloadError(ContractViolation):
    """The payload lacks what its source always sends: the delivery is refused (422), nothing is recorded."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__("webhook payload", [Violation(path, message)])


# A WORD-NUMBER inside a branch name (`port-12-login`, `feature/PORT-12`) or a title (`[PORT-12] Login`). It is
# only a candidate: `lodash-4.17.21`, `node-18.x`, `pr-42-<sha>`, `UTF-8` and `SHA-256` match too, so a candidate
# names a ticket only when the board knows its prefix (see `KnownKeys`).
_KEY_IN_BRANCH = re.compile(r"(?:^|[/_])([A-Za-z][A-Za-z0-9]*-[0-9]+)(?=$|[-_/.])")
_KEY_IN_TITLE = re.compile(r"\b([A-Z][A-Z0-9]*-[0-9]+)\b")
_DELIVERY_ID = re.compile(r"^[\x21-\x7e]{1,150}$")
_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")

# Given candidate keys (upper case), the ones whose prefix the board knows.
KnownKeys = Callable[[Sequence[str]], Collection[str]]


def known_prefixes(prefixes: Iterable[str]) -> KnownKeys:
    """A `KnownKeys` for a fixed set of prefixes (`{"PORT"}`): what a board of PORT tickets recognises."""
    allowed = frozenset(p.upper() for p in prefixes)
    return lambda candidates: {c for c in candidates if key_prefix(c) in allowed}


def key_prefix(key: str) -> str:
    """`PORT` for `PORT-12`."""
    return key.split("-", 1)[0]


def key_candidates(*, branch: str | None = None, title: str | None = None) -> list[str]:
    """Every WORD-NUMBER in the branch (at the start of a segment), then in the title, in order, upper-cased."""
    found: list[str] = []
    if branch:
        found.extend(m.group(1).upper() for m in _KEY_IN_BRANCH.finditer(branch))
    if title:
        found.extend(m.group(1) for m in _KEY_IN_TITLE.finditer(title))
    return list(dict.fromkeys(found))


def ticket_key_in(*, branch: str | None = None, title: str | None = None, known: KnownKeys) -> str | None:
    """The board ticket a PR or pipeline is about: the first candidate in its branch, else in its title, whose
    prefix the board knows (like the forge integrations of Jira and Linear, which link only keys of projects or
    teams they know). None when no candidate is known: the subject is then the PR or pipeline itself."""
    candidates = key_candidates(branch=branch, title=title)
    if not candidates:
        return None
    recognised = known(candidates)
    return next((c for c in candidates if c in recognised), None)


def event_id(prefix: str, delivery: str | None, raw: bytes) -> str:
    """`<prefix>:<delivery id>`, the sender's name for the delivery; without a usable one, the body's hash."""
    if usable_delivery_id(delivery):
        return f"{prefix}:{delivery}"
    return f"{prefix}:sha256-{hashlib.sha256(raw).hexdigest()[:48]}"


def commit_id(value: Any) -> str | None:
    """A git commit id as a sender names it (40 hex digits, or 64), lower-cased; None for anything else."""
    if not isinstance(value, str):
        return None
    lowered = value.strip().lower()
    return lowered if _SHA.match(lowered) else None


def usable_delivery_id(value: str | None) -> str | None:
    """The header's value when it can name an event (printable ASCII, at most 150 characters), else None."""
    return value if value and _DELIVERY_ID.match(value) else None


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
                return iso(parse_timestamp(f"{day}T{clock}{zone}"))
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


def ticket_subject(ticket: Ticket) -> dict[str, Any]:
    """A board ticket as an envelope's subject: its key, and its initiative and tracker issue when it has them."""
    subject: dict[str, Any] = {"type": "ticket", "id": ticket.key}
    if ticket.initiative_id:
        subject["initiative_id"] = ticket.initiative_id
    if ticket.tracker_issue_id:
        subject["tracker_issue_id"] = ticket.tracker_issue_id
    return subject


def repo_subject(key: str | None, *, repo: str | None, fallback_type: str, fallback_id: str) -> dict[str, Any]:
    """The ticket the forge object names, else the forge object itself (which no gate lets through)."""
    subject: dict[str, Any] = {"type": "ticket", "id": key} if key else {"type": fallback_type, "id": fallback_id}
    if repo:
        subject["repo"] = repo
    return subject


# Kinds after which the head's pipeline has not passed yet: the router waits for `pipeline_passed`.
_AWAITS_CI = frozenset({"opened", "synchronized", "ready_for_review", "pipeline_started"})


@dataclass(frozen=True)
class Transition:
    """What happened, as an envelope says it: the kind, from and to, and when (in the contract's form)."""

    kind: str
    from_state: str | None
    to_state: str | None
    occurred_at: str


@dataclass(frozen=True)
class ChangeRequest:
    """A GitHub pull request or a GitLab merge request; `name` is how the forge writes it (`acme/app#12`,
    `acme/app!12`), the subject when no ticket key is found in its branch or title."""

    source: ClassVar[str] = "forge"
    subject_type: ClassVar[str] = "pull_request"

    repo: str
    number: int
    branch: str
    title: str | None
    name: str
    head_sha: str | None = None
    merge_commit_sha: str | None = None


@dataclass(frozen=True)
class Pipeline:
    """A GitHub workflow run or a GitLab pipeline, with the change request it runs for (`number`) when it says."""

    source: ClassVar[str] = "ci"
    subject_type: ClassVar[str] = "pipeline"

    repo: str
    pipeline_id: int
    number: int | None
    branch: str | None
    title: str | None
    head_sha: str | None = None

    @property
    def name(self) -> str:
        return f"{self.repo}:{self.pipeline_id}"


def forge_event(
    event_id: str, what: Transition, about: ChangeRequest | Pipeline, *, actor: dict[str, Any], known: KnownKeys
) -> dict[str, Any]:
    """The envelope of a forge event, GitHub's or GitLab's: about a change request (source `forge`) or a pipeline
    (source `ci`, whose status is the transition's `to`; a failure asks for the fixer)."""
    failed = what.kind == "pipeline_failed"
    forge: dict[str, Any] = {"pr_number": about.number, "branch": about.branch}
    if isinstance(about, Pipeline):
        forge.update(pipeline_id=about.pipeline_id, pipeline_status=what.to_state)
    if about.head_sha is not None:
        forge["head_sha"] = about.head_sha
    if isinstance(about, ChangeRequest) and about.merge_commit_sha is not None:
        forge["merge_commit_sha"] = about.merge_commit_sha
    return build(
        event_id=event_id,
        occurred_at=what.occurred_at,
        source=about.source,
        kind=what.kind,
        from_state=what.from_state,
        to_state=what.to_state,
        subject=repo_subject(
            ticket_key_in(branch=about.branch, title=about.title, known=known),
            repo=about.repo,
            fallback_type=about.subject_type,
            fallback_id=about.name,
        ),
        actor=actor,
        eligible_for_worker=failed,
        blocked_reason="await_ci" if what.kind in _AWAITS_CI else None,
        suggested_role="fixer" if failed else None,
        forge=forge,
    )
