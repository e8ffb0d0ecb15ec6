"""GitLab, inbound (its REST API, outbound: `integrations/gitlab.py`): Merge Request Hook deliveries (source
`forge`) and Pipeline Hook deliveries (source `ci`).

| delivery                                       | kind               | hints                          |
|------------------------------------------------|--------------------|--------------------------------|
| merge_request open / reopen                    | `opened`           | await_ci                       |
| merge_request update with `oldrev` (a push)    | `synchronized`     | await_ci                       |
| merge_request update, draft → not draft        | `ready_for_review` | await_ci                       |
| merge_request merge                            | `merged`           |                                |
| merge_request close                            | `closed`           |                                |
| pipeline created/pending/running/manual/...    | `pipeline_started` | await_ci                       |
| pipeline success                               | `pipeline_passed`  |                                |
| pipeline failed                                | `pipeline_failed`  | eligible, suggested role fixer |
| pipeline canceled / skipped                    | `pipeline_skipped` |                                |

The actor of a merge request event is its `user` (`gitlab:<username>`; a bot user is an agent); pipelines carry
the system actor `gitlab:gitlab-ci`.

A delivery is GitLab's when its `X-Gitlab-Token` is the GitLab token (GitLab sends the token itself, not a
signature). Its event id is `gitlab:<Idempotency-Key>`, else `gitlab:<X-Gitlab-Event-UUID>.<body hash>`; it is
the same event as another when the Idempotency-Key (kept across GitLab's retries; 17.4 and later), else the
X-Gitlab-Event-UUID, *and* the body are the same. The token is not a signature, and the Event-UUID is shared by
every hook one action triggers (an MR merge and its pipeline), so neither alone can say which event it is.
"""

from __future__ import annotations

import hashlib
from typing import Any

from domain.idempotency import request_hash
from domain.router.senders.payloads import (
    ChangeRequest,
    Delivery,
    Identity,
    KnownKeys,
    PayloadError,
    Pipeline,
    Transition,
    Unmappable,
    commit_id,
    event_id,
    forge_event,
    maybe,
    need,
    usable_delivery_id,
    utc_timestamp,
)
from domain.router.senders.signatures import same_secret

TOKEN_HEADER = "X-Gitlab-Token"  # noqa: S105 (a header name, not a secret)
CI_ACTOR = {"kind": "system", "id": "gitlab:gitlab-ci"}

# pipeline status -> (kind, from, to / normalized pipeline status)
_PIPELINE = {
    "created": ("pipeline_started", None, "pending"),
    "waiting_for_resource": ("pipeline_started", None, "pending"),
    "preparing": ("pipeline_started", None, "pending"),
    "pending": ("pipeline_started", None, "pending"),
    "scheduled": ("pipeline_started", None, "pending"),
    "running": ("pipeline_started", "pending", "running"),
    "manual": ("pipeline_started", "running", "manual"),
    "success": ("pipeline_passed", "running", "success"),
    "failed": ("pipeline_failed", "running", "failure"),
    "canceled": ("pipeline_skipped", "running", "canceled"),
    "canceling": ("pipeline_skipped", "running", "canceled"),
    "skipped": ("pipeline_skipped", None, "skipped"),
}


def verify(token: str | None, secret: str | None) -> bool:
    """`X-Gitlab-Token` equal to the GitLab token."""
    return bool(secret) and token is not None and same_secret(token, secret)


def identify(delivery: Delivery) -> Identity:
    """The event id and the same-event key: the Idempotency-Key, else the Event-UUID, with the body's hash."""
    body = request_hash(delivery.document)
    key = usable_delivery_id(delivery.header("idempotency-key"))
    uuid = usable_delivery_id(delivery.header("x-gitlab-event-uuid"))
    stable = f"key:{key}" if key else f"uuid:{uuid}" if uuid else ""
    same = hashlib.sha256(f"{stable}\n{body}".encode()).hexdigest()
    shown = key or (f"{uuid}.{body[:12]}" if uuid else None)
    return Identity(event_id("gitlab", shown, delivery.raw), f"gitlab:sha256-{same}")


def normalize(event_id: str, payload: Any, *, known: KnownKeys) -> dict[str, Any]:
    """The envelope for one GitLab delivery, chosen by its `object_kind`; `known` says which ticket keys named in
    a branch or title are the board's."""
    if not isinstance(payload, dict):
        raise PayloadError("", "a GitLab webhook body is a JSON object")
    kind = maybe(payload, "object_kind")
    if kind == "merge_request":
        return merge_request(event_id, payload, known)
    if kind == "pipeline":
        return pipeline(event_id, payload, known)
    raise Unmappable(f"GitLab object_kind {kind or '(none)'} is not routed")


def actor_of(user: Any) -> dict[str, Any]:
    username = maybe(user, "username")
    if not isinstance(username, str) or not username:
        return {"kind": "unknown", "id": None}
    # GitLab marks project and group access-token users as bots by name (project_42_bot_...), and teams name
    # their service accounts *-bot.
    lowered = username.lower()
    kind = "agent" if "_bot" in lowered or lowered.endswith(("-bot", "[bot]")) else "human"
    return {"kind": kind, "id": f"gitlab:{username}"}


def merge_request(event_id: str, payload: dict[str, Any], known: KnownKeys) -> dict[str, Any]:
    attrs = need(payload, "object_attributes", kind=dict)
    action = maybe(attrs, "action")
    iid = need(payload, "object_attributes", "iid", kind=int)
    branch = need(payload, "object_attributes", "source_branch")
    title = maybe(attrs, "title") if isinstance(maybe(attrs, "title"), str) else None
    repo = need(payload, "project", "path_with_namespace")
    draft = maybe(attrs, "draft") is True or maybe(attrs, "work_in_progress") is True
    draft_change = maybe(payload, "changes", "draft")
    if action in {"open", "reopen"}:
        kind, from_state, to_state = "opened", None, "draft" if draft else "open"
    elif action == "update" and maybe(attrs, "oldrev"):
        kind, from_state, to_state = "synchronized", None, None
    elif action == "update" and maybe(draft_change, "previous") is True and maybe(draft_change, "current") is False:
        kind, from_state, to_state = "ready_for_review", "draft", "open"
    elif action == "merge":
        kind, from_state, to_state = "merged", "open", "merged"
    elif action == "close":
        kind, from_state, to_state = "closed", "open", "closed"
    else:
        raise Unmappable(f"merge_request action {action or '(none)'} is not routed")
    occurred = maybe(attrs, "updated_at") or maybe(attrs, "created_at")
    what = Transition(kind, from_state, to_state, utc_timestamp(occurred, path="/object_attributes/updated_at"))
    # The head is the merge request's last commit; a merge names the commit it made (none for a fast-forward).
    merge_commit = commit_id(maybe(attrs, "merge_commit_sha")) if kind == "merged" else None
    about = ChangeRequest(
        repo,
        iid,
        branch,
        title,
        name=f"{repo}!{iid}",
        head_sha=commit_id(maybe(attrs, "last_commit", "id")),
        merge_commit_sha=merge_commit,
    )
    return forge_event(event_id, what, about, actor=actor_of(maybe(payload, "user")), known=known)


def pipeline(event_id: str, payload: dict[str, Any], known: KnownKeys) -> dict[str, Any]:
    attrs = need(payload, "object_attributes", kind=dict)
    pipeline_id = need(payload, "object_attributes", "id", kind=int)
    status = need(payload, "object_attributes", "status")
    if status not in _PIPELINE:
        raise PayloadError("/object_attributes/status", f"is not a GitLab pipeline status: {status!r}")
    kind, from_state, to_state = _PIPELINE[status]
    repo = need(payload, "project", "path_with_namespace")
    mr = maybe(payload, "merge_request")
    branch = maybe(mr, "source_branch") or maybe(attrs, "ref")
    branch = branch if isinstance(branch, str) and branch else None
    title = maybe(mr, "title") if isinstance(maybe(mr, "title"), str) else None
    iid = maybe(mr, "iid")
    iid = iid if isinstance(iid, int) and not isinstance(iid, bool) and iid > 0 else None
    occurred = maybe(attrs, "finished_at") or maybe(attrs, "created_at")
    what = Transition(kind, from_state, to_state, utc_timestamp(occurred, path="/object_attributes/created_at"))
    about = Pipeline(repo, pipeline_id, iid, branch, title, head_sha=commit_id(maybe(attrs, "sha")))
    return forge_event(event_id, what, about, actor=dict(CI_ACTOR), known=known)
