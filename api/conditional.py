"""Conditional requests over HTTP (the tags and the check: `domain/entity_tags.py`): the `ETag` a changeable
resource answers with, and the `If-Match` a change of it carries."""

from __future__ import annotations

import falcon

IF_MATCH_DESCRIPTION = (
    "The `ETag` of the version the change was decided on. When the resource has changed since, the answer is "
    "412 and nothing changes; without the header the change is made whatever the current version (as before)."
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
