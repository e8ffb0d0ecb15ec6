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

Each delivery answered 2xx is remembered by its sender's own name for it (`remember`), in the unit of work that
answers it. That id is not what makes two deliveries the same event; it is only what lets the reconciler
(`domain/ops/reconciler.py`) tell "never arrived" from "arrived", since it is what the sender's delivery log lists:
GitHub's `X-GitHub-Delivery` (the `guid` of its log), GitLab's `Idempotency-Key` (else `X-Gitlab-Event-UUID`),
Linear's `Linear-Delivery`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from domain import gaps
from domain.config import Config
from domain.router.senders import github, gitlab, linear
from domain.router.senders.payloads import Delivery, Identity, KnownKeys, PayloadError, usable_delivery_id
from storage import reconciliation

SENDERS = {"github": github, "gitlab": gitlab, "linear": linear}
# The headers a forge delivery names its event in; a delivery to the forge endpoint must carry its sender's.
_EVENT_HEADERS = {"github": "x-github-event", "gitlab": "x-gitlab-event"}

# Where each sender names a delivery, in the order tried.
_DELIVERY_HEADERS = {
    "github": ("x-github-delivery",),
    "gitlab": ("idempotency-key", "x-gitlab-event-uuid"),
    "linear": ("linear-delivery",),
}

__all__ = [
    "Delivery",
    "Identity",
    "authenticate",
    "check_fresh",
    "delivery_id",
    "identify",
    "normalize",
    "remember",
    "sender_of",
]


def authenticate(endpoint: str, header: Callable[[str], str | None], raw: bytes, config: Config) -> str | None:
    """The sender whose credential verified this delivery to `endpoint` (`github`, `gitlab`, `linear`), or None.
    `header(name)` reads a request header; `raw` is the body as sent (what the signatures cover). A delivery that
    carries a GitHub signature is GitHub's or no one's: a wrong signature does not fall through to the token. Each
    sender is verified with its own credential, so GitLab's token (sent in plaintext) cannot sign as GitHub."""
    if endpoint == "forge":
        signature = header(github.SIGNATURE_HEADER)
        if signature is not None:
            return "github" if github.verify(signature, raw, config.github_secret) else None
        return "gitlab" if gitlab.verify(header(gitlab.TOKEN_HEADER), config.gitlab_token) else None
    if endpoint == "tracker":
        return "linear" if linear.verify(header(linear.SIGNATURE_HEADER), raw, config.tracker_webhook_secret) else None
    return None


def sender_of(endpoint: str, authenticated: str, headers: Mapping[str, str], document: Any) -> str:
    """Whose delivery this is, decided once: on the forge and tracker endpoints, the sender whose credential
    verified it (`authenticated`); on the CI endpoint (the CI secret says only that it is our CI), the sender its
    event header names, else the shape of its body: GitLab's pipeline event or GitHub's workflow_run. Raises
    `PayloadError` when a forge delivery does not name its event in its sender's header, or a CI report is neither."""
    if endpoint == "forge":
        if not headers.get(_EVENT_HEADERS[authenticated]):
            raise PayloadError("", "a forge delivery names its event in X-GitHub-Event or X-Gitlab-Event")
        return authenticated
    if endpoint != "ci":
        return authenticated
    for sender, event_header in _EVENT_HEADERS.items():
        if headers.get(event_header):
            return sender
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


def delivery_id(delivery: Delivery) -> str | None:
    """The sender's name for `delivery`, as its delivery log lists it, or None when it carries none usable."""
    for name in _DELIVERY_HEADERS.get(delivery.sender, ()):
        found = usable_delivery_id(delivery.header(name))
        if found:
            return found
    return None


def remember(delivery: Delivery, decision_id: int | None, *, at: datetime) -> None:
    """In the unit of work that answers `delivery` 2xx: record its id as accepted (kept as first seen when it was
    before), and mark the ledger's gap of it, if the reconciler asked for it again, `recovered`."""
    ident = delivery_id(delivery)
    if ident is None:
        return
    reconciliation.remember(delivery.sender, ident, decision_id, at=at)
    gaps.delivery_arrived(delivery.sender, ident, at=at)
