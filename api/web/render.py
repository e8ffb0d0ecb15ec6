"""Rendering pages: one Jinja2 environment with autoescaping, and the headers every page carries."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode

import falcon

from api.operations import Operation, Param
from api.web.guidance import what_to_do
from api.web.timeline import describe as describe_entry
from domain import entity_tags
from domain.clock import iso
from domain.dispatch import switch
from machines.ticket import menu as ticket_menu

if TYPE_CHECKING:
    from jinja2 import Environment

    from api.params import UnknownParameters

HTML = "text/html"

# Everything comes from this service; nothing inline, nothing from elsewhere.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def ago(value: datetime | None, now: datetime) -> str:
    """'3 minutes ago', the way a person reads a timestamp at a glance (the exact time is in a title)."""
    if value is None:
        return "never"
    seconds = int((now - value).total_seconds())
    future = seconds < 0
    seconds = abs(seconds)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = seconds // size
            text = f"{n} {unit}{'s' if n != 1 else ''}"
            return f"in {text}" if future else f"{text} ago"
    return "just now"


def when(value: datetime | None) -> str:
    """A timestamp for people: to the second, in UTC, said so."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else "never"


@functools.cache
def environment() -> Environment:
    # Jinja2 is imported with the first page, not with the app: a process that serves only the API starts faster.
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("api.web", "templates"),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["iso"] = iso
    env.filters["when"] = when
    env.globals["what_to_do"] = what_to_do
    env.globals["ago"] = ago
    env.globals["describe_entry"] = describe_entry
    # The move menu comes from the ticket machine itself: a move it forbids is never offered.
    env.globals["ticket_menu"] = ticket_menu
    # Each action control carries the tag of what the page shows, sent as If-Match (`domain/entity_tags.py`).
    env.globals["ticket_tag"] = entity_tags.ticket_tag
    env.globals["initiative_tag"] = entity_tags.initiative_tag
    env.globals["wallet_tag"] = entity_tags.wallet_tag
    env.globals["automation_tag"] = entity_tags.automation_tag
    return env


def page(resp: falcon.Response, template: str, *, now: datetime | None, **context) -> None:
    """Render `template` as the response. Every page also says whether dispatch is paused (`base.html`'s banner;
    the switch's mark is in every page's tag: `storage.freshness.EVERY_PAGE`)."""
    context["now"] = now
    context["dispatch"] = switch.read()
    resp.content_type = falcon.MEDIA_HTML
    resp.set_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    resp.set_header("X-Content-Type-Options", "nosniff")
    resp.set_header("Referrer-Policy", "same-origin")
    resp.set_header("Cache-Control", "no-store")
    resp.text = environment().get_template(template).render(**context)


def refused_query(req: falcon.Request, resp: falcon.Response, refusal: UnknownParameters) -> None:
    """A page asked for with a query parameter it does not take (`api/params.py`): a page saying so, 400, with a
    link to the same page without what it cannot read."""
    query = parse_qsl(req.query_string, keep_blank_values=True)
    kept = [(name, value) for name, value in query if name not in refusal.unknown]
    path = "/" + req.path.lstrip("/")  # never `//host`, which a browser would read as another site
    page(
        resp,
        "refused_query.html",
        now=None,
        refused=str(refusal),
        without=path + ("?" + urlencode(kept) if kept else ""),
        **signed_in(req),
    )
    resp.status = falcon.HTTP_400


# -- what every page declares and says about who is looking (pages.py, router_right.py) -------------------

IF_NONE_MATCH = Param(
    "If-None-Match",
    {"type": "string"},
    "The page's ETag from before: 304 with no body while nothing on the page has changed.",
    location="header",
)


def signed_in(req: falcon.Request) -> dict:
    """What every page says about who is looking: their name and role, and whether it shows action controls."""
    identity = req.context.identity
    return {"signed_in": identity.actor, "signed_in_role": identity.role, "can_act": can_act(req)}


def page_operation(summary: str, *, params=(), statuses=(200,)) -> Operation:
    """A page's declaration: it answers a conditional GET (304) and carries an ETag."""
    responses = {status: None for status in (*statuses, 304)}
    return Operation(
        summary, responses=responses, params=(*params, IF_NONE_MATCH), tags=("web board",), content_type=HTML
    )


def can_act(req: falcon.Request) -> bool:
    """Whether the person may use the board's action controls (every one is rendered behind this flag).

    A viewer sees none: the API would refuse every one of them anyway.
    """
    return req.context.identity.may_change


def person(req: falcon.Request) -> tuple[str, str | None, bool]:
    """Who is looking, as far as a page differs by it: their name (\"signed in as\"), role, and controls."""
    identity = req.context.identity
    return (identity.actor, identity.role, identity.may_change)
