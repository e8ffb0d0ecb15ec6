"""GitHub, inbound (its REST API, outbound: `integrations/github.py`): `pull_request` deliveries (source `forge`)
and Actions `workflow_run` deliveries (source `ci`).

| delivery                               | kind               | from -> to               | hints          |
|----------------------------------------|--------------------|--------------------------|----------------|
| pull_request opened / reopened         | `opened`           | none -> open or draft    | await_ci       |
| pull_request synchronize               | `synchronized`     | none -> none             | await_ci       |
| pull_request ready_for_review          | `ready_for_review` | draft -> open            | await_ci       |
| pull_request closed, merged            | `merged`           | open -> merged           |                |
| pull_request closed, not merged        | `closed`           | open -> closed           |                |
| workflow_run requested / in_progress   | `pipeline_started` | none -> pending, running | await_ci       |
| workflow_run action_required (approve) | `pipeline_started` | none -> manual           | await_ci       |
| workflow_run completed success         | `pipeline_passed`  | running -> success       |                |
| workflow_run completed failure/timeout | `pipeline_failed`  | running -> failure       | eligible fixer |
| workflow_run completed cancelled, ...  | `pipeline_skipped` | running -> canceled      |                |

The actor of a pull request is its `sender` (`github:<login>`; a `Bot` account is an agent); CI events carry
the system actor `github:github-actions`.

A delivery is GitHub's when `X-Hub-Signature-256` is the HMAC-SHA256 of its raw body under the GitHub secret.
Its event id is `github:<X-GitHub-Delivery>`; it is the same event as another when the signed body is the same:
GitHub's redeliveries resend the body byte for byte, and the delivery id is not signed.
"""

from __future__ import annotations

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
from domain.router.senders.signatures import hmac_sha256_hex, same_secret

SIGNATURE_HEADER = "X-Hub-Signature-256"

CI_ACTOR = {"kind": "system", "id": "github:github-actions"}

_PR_KINDS = {
    "opened": "opened",
    "reopened": "opened",
    "synchronize": "synchronized",
    "ready_for_review": "ready_for_review",
}

# workflow_run conclusion -> (kind, normalized pipeline status)
_CONCLUSIONS = {
    "success": ("pipeline_passed", "success"),
    "failure": ("pipeline_failed", "failure"),
    "timed_out": ("pipeline_failed", "failure"),
    "startup_failure": ("pipeline_failed", "failure"),
    "cancelled": ("pipeline_skipped", "canceled"),
    "skipped": ("pipeline_skipped", "skipped"),
    "neutral": ("pipeline_skipped", "skipped"),
    "stale": ("pipeline_skipped", "skipped"),
    "action_required": ("pipeline_started", "manual"),
}
# workflow_run action of a run that has no conclusion yet -> (from, normalized pipeline status)
_UNDECIDED = {"requested": (None, "pending"), "in_progress": ("pending", "running")}


def verify(signature: str | None, raw: bytes, secret: str | None) -> bool:
    """`X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the raw body under `secret`."""
    if not secret or signature is None:
        return False
    return same_secret(signature.strip().lower(), "sha256=" + hmac_sha256_hex(secret, raw))


def identify(delivery: Delivery) -> Identity:
    """The event id (`github:<X-GitHub-Delivery>`) and the same-event key (the signed body's hash)."""
    given = usable_delivery_id(delivery.header("x-github-delivery"))
    return Identity(event_id("github", given, delivery.raw), f"github:sha256-{request_hash(delivery.document)}")


def normalize_delivery(delivery: Delivery, identity: Identity, *, known: KnownKeys) -> dict[str, Any]:
    """The envelope for `delivery`, by its `X-GitHub-Event` (a CI report may come without it, in workflow_run
    shape)."""
    event = delivery.header("x-github-event") or "workflow_run"
    return normalize(event, identity.event_id, delivery.document, known=known)


def normalize(event: str | None, event_id: str, payload: Any, *, known: KnownKeys) -> dict[str, Any]:
    """The envelope for one GitHub delivery (`X-GitHub-Event` is `event`); `known` says which ticket keys named in
    a branch or title are the board's."""
    if not isinstance(payload, dict):
        raise PayloadError("", "a GitHub webhook body is a JSON object")
    if event == "pull_request":
        return pull_request(event_id, payload, known)
    if event == "workflow_run":
        return workflow_run(event_id, payload, known)
    if event == "ping":
        raise Unmappable("ping: the webhook is set up; nothing to route")
    raise Unmappable(f"GitHub event {event or '(none)'} is not routed")


def actor_of(sender: Any) -> dict[str, Any]:
    login = maybe(sender, "login")
    if not isinstance(login, str) or not login:
        return {"kind": "unknown", "id": None}
    kind = "agent" if maybe(sender, "type") == "Bot" else "human"
    return {"kind": kind, "id": f"github:{login}"}


def pull_request(event_id: str, payload: dict[str, Any], known: KnownKeys) -> dict[str, Any]:
    action = need(payload, "action")
    pr = need(payload, "pull_request", kind=dict)
    number = need(payload, "pull_request", "number", kind=int)
    branch = need(payload, "pull_request", "head", "ref")
    title = maybe(pr, "title") if isinstance(maybe(pr, "title"), str) else None
    repo = need(payload, "repository", "full_name")
    draft = maybe(pr, "draft") is True
    if action in _PR_KINDS:
        kind = _PR_KINDS[action]
        from_state, to_state = {
            "opened": (None, "draft" if draft else "open"),
            "synchronized": (None, None),
            "ready_for_review": ("draft", "open"),
        }[kind]
        occurred = need(payload, "pull_request", "updated_at")
    elif action == "closed":
        merged = maybe(pr, "merged") is True
        kind, from_state, to_state = ("merged", "open", "merged") if merged else ("closed", "open", "closed")
        occurred = maybe(pr, "merged_at") or maybe(pr, "closed_at") or need(payload, "pull_request", "updated_at")
    else:
        raise Unmappable(f"pull_request action {action} is not routed")
    what = Transition(kind, from_state, to_state, utc_timestamp(occurred, path="/pull_request/updated_at"))
    # The head the event is about; on a merge, the commit it made on the base branch.
    merge_commit = commit_id(maybe(pr, "merge_commit_sha")) if kind == "merged" else None
    about = ChangeRequest(
        repo,
        number,
        branch,
        title,
        name=f"{repo}#{number}",
        head_sha=commit_id(maybe(pr, "head", "sha")),
        merge_commit_sha=merge_commit,
    )
    return forge_event(event_id, what, about, actor=actor_of(maybe(payload, "sender")), known=known)


def workflow_run(event_id: str, payload: dict[str, Any], known: KnownKeys) -> dict[str, Any]:
    action = need(payload, "action")
    run = need(payload, "workflow_run", kind=dict)
    run_id = need(payload, "workflow_run", "id", kind=int)
    branch = maybe(run, "head_branch") if isinstance(maybe(run, "head_branch"), str) else None
    repo = need(payload, "repository", "full_name")
    pr_number = maybe(run, "pull_requests", 0, "number")
    pr_number = pr_number if isinstance(pr_number, int) and not isinstance(pr_number, bool) else None
    title = maybe(run, "display_title") if isinstance(maybe(run, "display_title"), str) else None
    conclusion = maybe(run, "conclusion")
    if action not in _UNDECIDED and action != "completed":
        raise Unmappable(f"workflow_run action {action} is not routed")
    if conclusion is not None or action == "completed":
        # A run can be decided when it is requested: one that waits for a maintainer's approval arrives as
        # `requested` with status completed and conclusion action_required (octokit's requested.with-conclusion).
        if conclusion not in _CONCLUSIONS:
            raise PayloadError("/workflow_run/conclusion", f"is not a workflow_run conclusion: {conclusion!r}")
        kind, status = _CONCLUSIONS[conclusion]
        from_state = "running" if action == "completed" else _UNDECIDED[action][0]
    else:
        kind = "pipeline_started"
        from_state, status = _UNDECIDED[action]
    occurred = maybe(run, "updated_at") or need(payload, "workflow_run", "created_at")
    what = Transition(kind, from_state, status, utc_timestamp(occurred, path="/workflow_run/updated_at"))
    about = Pipeline(repo, run_id, pr_number, branch, title, head_sha=commit_id(maybe(run, "head_sha")))
    return forge_event(event_id, what, about, actor=dict(CI_ACTOR), known=known)
