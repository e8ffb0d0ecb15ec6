"""From a webhook delivery to an envelope: which sender it is (decided once, by the credential that verified it),
which event id, what makes two deliveries the same event, and which normalizer reads it.

- `webhooks/forge`: GitHub (`pull_request`, `workflow_run`) when `X-Hub-Signature-256` verifies, GitLab
  (Merge Request Hook, Pipeline Hook) when `X-Gitlab-Token` does. A workflow_run or a pipeline is normalized
  with source `ci`.
- `webhooks/ci`: our own CI, under the CI secret, reporting in GitLab's pipeline shape or GitHub's workflow_run
  shape (headers or not): the body's shape says which.
- `webhooks/tracker`: Linear, when `Linear-Signature` verifies.

Each sender's own rules (its signature, its event id, its same-event key, its payloads) live in its module under
`domain/router/senders/`. Bodies are compared by the SHA-256 of their canonical JSON (keys sorted, no spaces), so
the same event sent form-encoded or as JSON, or resent with its keys reordered (GitLab resends from its stored
log), is one event, and two deliveries with different content never are. Without a delivery header the event id
is the body's hash.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from domain.config import Config
from domain.router.senders import github, gitlab, linear
from domain.router.senders.payloads import Delivery, Identity, KnownKeys, PayloadError

ENDPOINTS = ("forge", "ci", "tracker")
SENDERS = {"github": github, "gitlab": gitlab, "linear": linear}

__all__ = ["ENDPOINTS", "Delivery", "Identity", "authenticate", "check_fresh", "ci_report_sender", "identify"]


def authenticate(endpoint: str, header: Callable[[str], str | None], raw: bytes, config: Config) -> str | None:
    """The sender whose credential verified this delivery to `endpoint` (`github`, `gitlab`, `linear`), or None.
    `header(name)` reads a request header; `raw` is the body as sent (what the signatures cover)."""
    if endpoint == "forge":
        if github.verify(header(github.SIGNATURE_HEADER), raw, config.forge_webhook_secret):
            return "github"
        if gitlab.verify(header(gitlab.TOKEN_HEADER), config.forge_webhook_secret):
            return "gitlab"
        return None
    if endpoint == "tracker":
        return "linear" if linear.verify(header(linear.SIGNATURE_HEADER), raw, config.tracker_webhook_secret) else None
    return None


def ci_report_sender(document: Any) -> str:
    """Whose shape a CI report (under the CI secret) has: `gitlab` (object_kind pipeline) or `github`
    (workflow_run); `PayloadError` for anything else."""
    if isinstance(document, dict) and document.get("object_kind") == "pipeline":
        return "gitlab"
    if isinstance(document, dict) and "workflow_run" in document:
        return "github"
    raise PayloadError("", "expected a GitLab pipeline event (object_kind pipeline) or a GitHub workflow_run event")


def check_fresh(delivery: Delivery, *, now: datetime, tolerance: float) -> None:
    """Refuse (`StaleDelivery`) a delivery whose sender signs the time of sending and signed one outside the
    replay window. Only Linear signs a time; GitHub and GitLab sign none (GitHub lets a person redeliver a delivery
    days later), so for them only the same-event key applies."""
    if delivery.sender == "linear":
        linear.check_fresh(delivery.document, now=now, tolerance=tolerance)


def identify(delivery: Delivery) -> Identity:
    """The event id and same-event key of `delivery`, by its sender's rules."""
    return SENDERS[delivery.sender].identify(delivery)


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
    if delivery.sender == "linear":
        return linear.normalize(identity.event_id, delivery.document, lookup)
    if delivery.sender == "gitlab":
        return gitlab.normalize(identity.event_id, delivery.document, known=known)
    return github.normalize_delivery(delivery, identity, known=known)
