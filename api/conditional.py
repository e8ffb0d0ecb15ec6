"""Conditional requests over HTTP (the tags and the check: `domain/entity_tags.py`): the `ETag` a changeable
resource answers with, and the `If-Match` a change of it carries."""

from __future__ import annotations

import falcon

from api.errors import Problem

IF_MATCH_DESCRIPTION = (
    "The `ETag` of the version the change was decided on. When the resource has changed since, the answer is "
    "412 and nothing changes; without the header the change is made whatever the current version (as before)."
)
IF_MATCH_REQUIRED_DESCRIPTION = (
    "The `ETag` of the version the change was decided on (required: without it the answer is 428). When the "
    "resource has changed since, the answer is 412 and nothing changes."
)
PRECONDITION_REQUIRED_DESCRIPTION = (
    "Precondition Required: this change must say which version it was decided on (`If-Match` with the `ETag` of a "
    "GET); nothing was changed."
)
ETAG_DESCRIPTION = "A strong entity tag of the resource as answered: send it back as `If-Match` with a change."
PRECONDITION_DESCRIPTION = (
    "Precondition Failed: the `If-Match` tag is not the current version (someone changed it since). The problem "
    "names the current state (`current`, `etag`), who changed it last (`changed_by`, `changed_at`) and what they "
    "did (`last_change`); nothing was changed."
)


def if_match(req: falcon.Request) -> tuple[str, ...] | None:
    """The request's `If-Match` tags, quoted as `ETag` sends them, or None when it sent none.

    A weak tag (`W/"..."`) never matches: a change compares tags strongly (RFC 9110, section 13.1.1).
    """
    tags = req.if_match
    if tags is None:
        return None
    return tuple("*" if tag == "*" else tag.dumps() for tag in tags if tag == "*" or not tag.is_weak)


def tag(resp: falcon.Response, value: str) -> None:
    """Send `value` (already quoted) as the answer's `ETag`."""
    resp.set_header("ETag", value)


def require_if_match(req: falcon.Request) -> None:
    """Refuse (428) a change sent without `If-Match`, for a resource whose changes must name what they replace."""
    if req.get_header("If-Match") is None:
        raise Problem(
            428,
            "precondition-required",
            "send If-Match with the ETag of the version this change was decided on (from a GET of it): a change "
            "made without it could silently undo one made meanwhile; nothing was changed",
        )
