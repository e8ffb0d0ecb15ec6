"""What each responder declares about itself: credentials, request schema, responses, query parameters.

The same declarations drive the auth and body middleware and the OpenAPI document, so the document cannot
drift from what the app enforces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

# Credential schemes (see ../shared/CONTRACT.md, "Credentials").
PUBLIC = "public"
BASIC = "basic"
CI = "ci"
CI_OR_BASIC = "ci_or_basic"
FORGE_SIGNATURE = "forge_signature"
TRACKER_SIGNATURE = "tracker_signature"

SCHEMES = {PUBLIC, BASIC, CI, CI_OR_BASIC, FORGE_SIGNATURE, TRACKER_SIGNATURE}
# Methods that only read. Every other method changes something: a viewer's account may not use it, and a
# browser's cross-site request may not ride on cached basic credentials to it.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Who of the worker accounts (`domain/accounts.py`, a machine in a bay) may call an operation: none of them (the
# default: people's endpoints and pages), only they (claim, heartbeat, result: nobody else), or they as well as
# people, for what they hold or held (the responder asks the domain).
NO_WORKERS, WORKERS_ONLY, WORKERS_TOO = "no_workers", "workers_only", "workers_too"


def changes_something(method: str, operation: Operation | None = None) -> bool:
    """Whether an operation under `method` changes something: every unsafe method does, unless the operation
    declares `changes_nothing` (a POST that only computes an answer, such as a backtest: a viewer may use it)."""
    if operation is not None and operation.changes_nothing:
        return False
    return method.upper() not in SAFE_METHODS


JSON = "application/json"
FORM_PAYLOAD = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class Param:
    name: str
    schema: dict[str, Any]
    description: str = ""
    location: str = "query"
    required: bool = False


@dataclass(frozen=True)
class Operation:
    summary: str
    auth: str = BASIC
    request: str | None = None
    # What the middleware checks, when it is less than `request` (which the document shows): the responder
    # checks the rest itself. `POST events` lets a broken envelope through to the router, which records it.
    request_checked: str | None = None
    # The body may be omitted entirely (then it reads as {}), e.g. mark_done with no reason.
    request_optional: bool = False
    # Raw bodies (webhooks) are read by the responder itself: signatures are over the exact bytes.
    raw_body: bool = False
    responses: dict[int, str | None] = field(default_factory=dict)
    params: tuple[Param, ...] = ()
    tags: tuple[str, ...] = ()
    idempotent_key: bool = False
    content_type: str = "application/json"
    # Media types the request body may come in. `FORM_PAYLOAD` is GitHub's form-encoded webhook delivery: the JSON
    # document in a `payload` form field (raw_body operations only; the responder reads it).
    request_media: tuple[str, ...] = (JSON,)
    # A changeable resource's read answers with its `ETag` (and so does each change of it, with the new one).
    etag: bool = False
    # A change that honours `If-Match` (412 when it names an older version; `api/conditional.py`).
    if_match: bool = False
    # ... and refuses to be made without it (428): a change that could silently undo one made meanwhile.
    if_match_required: bool = False
    # Words for a response beyond its status's name, e.g. what else than a bad signature a 401 can mean.
    response_notes: dict[int, str] = field(default_factory=dict)
    # A POST that writes nothing (it takes a body only because the question does not fit a query string).
    changes_nothing: bool = False
    # Whether worker accounts may call it (`NO_WORKERS`, `WORKERS_ONLY`, `WORKERS_TOO`).
    workers: str = NO_WORKERS

    @cached_property
    def query_names(self) -> frozenset[str]:
        """The query parameters this operation takes: any other is refused (400, `api/params.py`)."""
        return frozenset(p.name for p in self.params if p.location == "query")

    def __post_init__(self) -> None:
        if self.auth not in SCHEMES:
            raise ValueError(f"unknown auth scheme {self.auth!r}")
        if FORM_PAYLOAD in self.request_media and not self.raw_body:
            raise ValueError("a form-encoded payload is read by the responder: declare raw_body")
        if self.if_match_required and not self.if_match:
            raise ValueError("a change that requires If-Match honours it: declare if_match too")
        if self.workers not in (NO_WORKERS, WORKERS_ONLY, WORKERS_TOO):
            raise ValueError(f"unknown workers rule {self.workers!r}")
        if self.workers != NO_WORKERS and self.auth != BASIC:
            raise ValueError("workers sign in with basic credentials: an operation for them is BASIC")


# A key, an id or a name taken in a path or a query: any text without a control character (one is refused, 400).
IDENTIFIER: dict[str, Any] = {
    "type": "string",
    "not": {"pattern": r"[\x00-\x1f\x7f-\x9f]"},
    "description": "no control character (a line break included)",
}
LIMIT = Param("limit", {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}, "Page size.")
CURSOR = Param("cursor", {"type": "string"}, "The `next` value of the previous page.")
