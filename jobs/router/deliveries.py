"""From a signed webhook delivery to an envelope: which normalizer, which event id, and what makes two
deliveries the same event.

- `webhooks/forge` with `X-GitHub-Event` (pull_request, workflow_run): `github`. A workflow_run is normalized
  with source `ci`.
- `webhooks/forge` with `X-Gitlab-Event` (Merge Request Hook, Pipeline Hook): `gitlab`. A pipeline is
  normalized with source `ci`.
- `webhooks/ci`: a GitLab pipeline or a GitHub workflow_run body, headers or not: `gitlab` / `github`.
- `webhooks/tracker`: a Linear webhook: `linear`.

Two names per delivery (`Identity`). The event id is the sender's own name for the delivery, so a person can
find it in the sender's delivery log. The *same-event key* decides what is a redelivery, and it is made only
from what the sender signed or keeps across its retries, never from a header anyone can change:

- GitHub: event id `github:<X-GitHub-Delivery>`; the same event when the signed body is the same. GitHub's
  redeliveries resend the body byte for byte, and the delivery id is not signed.
- GitLab: event id `gitlab:<Idempotency-Key>`, else `gitlab:<X-Gitlab-Event-UUID>.<body hash>`; the same event
  when the Idempotency-Key (kept across GitLab's retries; 17.4 and later), else the X-Gitlab-Event-UUID, *and*
  the body are the same. The token is not a signature, and the Event-UUID is shared by every hook one action
  triggers, so neither alone can say which event a delivery is.
- Linear: event id `linear:<Linear-Delivery>`; the same event when the signed body is the same apart from its
  `webhookTimestamp` (Linear signs a fresh one on each attempt). Linear-Delivery is not signed.

Bodies are compared by the SHA-256 of their canonical JSON (keys sorted, no spaces), so the same event sent
form-encoded or as JSON, or resent with its keys reordered (GitLab resends from its stored log), is one event,
and two deliveries with different content never are. Without a delivery header the event id is the body's
hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobs.router.normalizers import github, gitlab, linear
from jobs.router.normalizers.envelope import KnownKeys, PayloadError, event_id, usable_delivery_id
from svc.errors import StaleDelivery

ENDPOINTS = ("forge", "ci", "tracker")
# The body member in which Linear signs the time of each attempt (milliseconds since the epoch).
LINEAR_TIMESTAMP = "webhookTimestamp"


@dataclass(frozen=True)
class Delivery:
    """One webhook delivery whose credentials were already checked."""

    endpoint: str  # forge, ci or tracker
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
    """`event_id` names the event in decisions; `same_event` decides what is a redelivery of it; `sender` is
    `github`, `gitlab` or `linear` (which normalizer reads the delivery)."""

    event_id: str
    same_event: str
    sender: str


def check_fresh(delivery: Delivery, *, now: datetime, tolerance: float) -> None:
    """Refuse (`StaleDelivery`) a delivery whose sender signs the time of sending and signed one further than
    `tolerance` seconds from `now`: a captured delivery replayed later, or a clock far off. Linear signs
    `webhookTimestamp` into every delivery's body; Linear's own SDK allows a minute. GitHub and GitLab sign no
    time (GitHub lets a person redeliver a delivery days later), so for them only the same-event key applies."""
    if delivery.endpoint != "tracker":
        return
    stamp = delivery.document.get(LINEAR_TIMESTAMP) if isinstance(delivery.document, dict) else None
    if stamp is None:
        raise StaleDelivery(
            f"the delivery carries no signed {LINEAR_TIMESTAMP}: Linear signs the time into every delivery, "
            "and without one it cannot be told from a replay"
        )
    if not isinstance(stamp, int | float) or isinstance(stamp, bool) or not 0 < stamp < 1e15:
        raise StaleDelivery(f"the delivery's {LINEAR_TIMESTAMP} is not a Unix time in milliseconds: {stamp!r}")
    skew = stamp / 1000 - now.timestamp()
    if abs(skew) > tolerance:
        when = "ahead of" if skew > 0 else "behind"
        raise StaleDelivery(
            f"the delivery's signed {LINEAR_TIMESTAMP} is {abs(skew):.0f} s {when} this server's clock, outside "
            f"the replay window of {tolerance:g} s (SVC_WEBHOOK_TOLERANCE_SECONDS): refused as a possible replay"
        )


def identify(delivery: Delivery) -> Identity:
    """The event id and same-event key of `delivery` (see the module's table)."""
    sender = sender_of(delivery)
    if sender == "linear":
        body = _fingerprint(_without(delivery.document, LINEAR_TIMESTAMP))
        given = usable_delivery_id(delivery.header("linear-delivery"))
        return Identity(event_id("linear", given, delivery.raw), f"linear:sha256-{body}", sender)
    if sender == "gitlab":
        body = _fingerprint(delivery.document)
        key = usable_delivery_id(delivery.header("idempotency-key"))
        uuid = usable_delivery_id(delivery.header("x-gitlab-event-uuid"))
        # X-Gitlab-Event-UUID is shared by every hook one action triggers (an MR merge and its pipeline), so
        # alone it names no single event; the body tells them apart.
        stable = f"key:{key}" if key else f"uuid:{uuid}" if uuid else ""
        same = hashlib.sha256(f"{stable}\n{body}".encode()).hexdigest()
        shown = key or (f"{uuid}.{body[:12]}" if uuid else None)
        return Identity(event_id("gitlab", shown, delivery.raw), f"gitlab:sha256-{same}", sender)
    body = _fingerprint(delivery.document)
    given = usable_delivery_id(delivery.header("x-github-delivery"))
    return Identity(event_id("github", given, delivery.raw), f"github:sha256-{body}", sender)


def sender_of(delivery: Delivery) -> str:
    """`github`, `gitlab` or `linear`; raises `PayloadError` when the delivery names no sender the endpoint
    takes."""
    if delivery.endpoint == "tracker":
        return "linear"
    if delivery.header("x-github-event"):
        return "github"
    if delivery.header("x-gitlab-event"):
        return "gitlab"
    document = delivery.document
    if delivery.endpoint == "ci":
        # Our own CI reports bodies in GitLab's pipeline or GitHub's workflow_run shape, headers or not.
        if isinstance(document, dict) and document.get("object_kind") == "pipeline":
            return "gitlab"
        if isinstance(document, dict) and "workflow_run" in document:
            return "github"
        raise PayloadError("", "expected a GitLab pipeline event (object_kind pipeline) or a GitHub workflow_run event")
    raise PayloadError("", "a forge delivery names its event in X-GitHub-Event or X-Gitlab-Event")


def normalize(
    delivery: Delivery,
    identity: Identity,
    *,
    known: KnownKeys,
    lookup: linear.TicketLookup | None = None,
) -> dict[str, Any]:
    """The envelope for `delivery`; raises `Unmappable` (nothing to route) or `PayloadError` (malformed).

    `known` says which ticket keys named in a branch or title are the board's; `lookup` finds the board
    ticket tracking a Linear issue."""
    if identity.sender == "linear":
        return linear.normalize(identity.event_id, delivery.document, lookup)
    if identity.sender == "gitlab":
        return gitlab.normalize(identity.event_id, delivery.document, known=known)
    event = delivery.header("x-github-event") or "workflow_run"  # a CI report in workflow_run shape
    return github.normalize(event, identity.event_id, delivery.document, known=known)


def _without(document: Any, member: str) -> Any:
    if isinstance(document, dict) and member in document:
        return {k: v for k, v in document.items() if k != member}
    return document


def _fingerprint(document: Any) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
