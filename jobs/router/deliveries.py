"""From a signed webhook delivery to an envelope: which normalizer, and which event id.

- `webhooks/forge` with `X-GitHub-Event` (pull_request, workflow_run): `github`; event id
  `github:<X-GitHub-Delivery>`. A workflow_run is normalized with source `ci`.
- `webhooks/forge` with `X-Gitlab-Event` (Merge Request Hook, Pipeline Hook): `gitlab`; event id
  `gitlab:<X-Gitlab-Event-UUID>`. A pipeline is normalized with source `ci`.
- `webhooks/ci`: a GitLab pipeline or a GitHub workflow_run body, headers or not: `gitlab` / `github`.
- `webhooks/tracker`: a Linear webhook: `linear`; event id `linear:<Linear-Delivery>`.

Without a delivery id header the id is made from the body's hash, so an identical redelivery is still one event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs.router.normalizers import github, gitlab, linear
from jobs.router.normalizers.envelope import PayloadError, event_id

ENDPOINTS = ("forge", "ci", "tracker")


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
        return self.header("x-github-delivery") or self.header("x-gitlab-event-uuid") or self.header("linear-delivery")


def normalize(delivery: Delivery, lookup: linear.TicketLookup | None = None) -> dict[str, Any]:
    """The envelope for `delivery`; raises `Unmappable` (nothing to route) or `PayloadError` (malformed)."""
    if delivery.endpoint == "tracker":
        return linear.normalize(_id("linear", delivery, "linear-delivery"), delivery.document, lookup)
    github_event = delivery.header("x-github-event")
    gitlab_event = delivery.header("x-gitlab-event")
    document = delivery.document
    if delivery.endpoint == "ci" and not github_event and not gitlab_event:
        # Our own CI reports bodies in GitLab's pipeline or GitHub's workflow_run shape, headers or not.
        if isinstance(document, dict) and document.get("object_kind") == "pipeline":
            gitlab_event = "Pipeline Hook"
        elif isinstance(document, dict) and "workflow_run" in document:
            github_event = "workflow_run"
    if github_event:
        return github.normalize(github_event, _id("github", delivery, "x-github-delivery"), document)
    if gitlab_event:
        return gitlab.normalize(_id("gitlab", delivery, "x-gitlab-event-uuid"), document)
    if delivery.endpoint == "ci":
        raise PayloadError("", "expected a GitLab pipeline event (object_kind pipeline) or a GitHub workflow_run event")
    raise PayloadError("", "a forge delivery names its event in X-GitHub-Event or X-Gitlab-Event")


def _id(prefix: str, delivery: Delivery, header: str) -> str:
    return event_id(prefix, delivery.header(header), delivery.raw)
