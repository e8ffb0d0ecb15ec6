"""Conditional GETs for the web board: each page's `ETag` is made from its marks of change (`storage/freshness.py`),
so a page that has not changed answers `If-None-Match` with 304 and no body, before anything is read for it or rendered.

The tag is weak (`W/"..."`): besides the marks it holds the minute, since a page says "3 minutes ago" and
"next in 2 hours", and a render within the same minute may differ from another by those words alone. A new
release (templates, script) and who is looking (their name, role and controls) change it too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from importlib import resources
from typing import Any

import falcon

from domain import __version__


def _digest_of_the_web_files() -> str:
    # Read once at import: the templates and static files this release renders with.
    digest = hashlib.sha256(__version__.encode())
    root = resources.files("api.web")
    for folder in ("templates", "static"):
        for item in sorted(root.joinpath(folder).iterdir(), key=lambda entry: entry.name):
            if item.is_file():
                digest.update(item.name.encode())
                digest.update(item.read_bytes())
    return digest.hexdigest()[:16]


RELEASE = _digest_of_the_web_files()


def etag(*, marks: Iterable[Any], now: datetime, person: Any, extra: Iterable[Any] = ()) -> str:
    """The weak entity tag of a page (without quotes or `W/`; `falcon.Response.etag` is given it whole).

    `person` is who is looking, as far as the page differs by it (their name, role and controls).
    """
    minute = now.replace(second=0, microsecond=0).isoformat()
    text = "|".join(repr(value) for value in (RELEASE, person, minute, *marks, *extra))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def unchanged(req: falcon.Request, resp: falcon.Response, tag: str, *, exists: bool = True) -> bool:
    """Set the page's `ETag`; when the request's `If-None-Match` names it (or `*`), answer 304 and return True.

    Comparison is weak, as RFC 9110 has it for `If-None-Match`. `*` matches only a page that `exists` (a ticket
    page's ticket may not): RFC 9110 has it match any current representation, and a 404 is none.
    """
    resp.set_header("ETag", f'W/"{tag}"')
    resp.set_header("Cache-Control", "no-store")
    given = req.if_none_match or []
    matching = {tag, "*"} if exists else {tag}
    if any(str(candidate) in matching for candidate in given):
        resp.status = falcon.HTTP_304
        return True
    return False
