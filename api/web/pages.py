"""The board's pages. Like the API's resources, each reads through the units of work and renders."""

from __future__ import annotations

import re
from importlib import resources
from urllib.parse import urlencode

import falcon

from api import params
from api.operations import CURSOR, Operation, Param
from api.web import decisions
from api.web.render import page
from jobs import agents_strip
from jobs.router.shadow import OUTCOMES, SOURCES
from machines.stages import STAGES, WRITING_TICKET_KEY
from storage import runs
from svc import automation
from svc.errors import NotFound

HTML = "text/html"
RECENT_RUNS = 20
DECISIONS_PER_PAGE = 50
DECISIONS_ON_TICKET = 5
TICKET_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9]*-[A-Za-z0-9]+$")


def signed_in(req: falcon.Request) -> dict:
    """What every page says about who is looking: their name and role, and whether it shows action controls
    (`can_act`: never for a viewer, whom the API would refuse anyway)."""
    identity = req.context.identity
    return {"can_act": identity.may_change, "signed_in": identity.actor, "signed_in_role": identity.role}


def _html(summary: str, *, params=(), statuses=(200,)) -> Operation:
    responses = {status: None for status in statuses}
    return Operation(summary, responses=responses, params=params, tags=("web board",), content_type=HTML)


class BoardPage:
    operations = {"GET": _html("The web board: Needs-you, the agents strip, a column per stage")}

    def __init__(self, board, clock):
        self.board = board
        self.clock = clock

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        now = self.clock()
        strip = agents_strip.strip(now)
        history = {status.schedule.agent_id: runs.latest(status.schedule.agent_id, RECENT_RUNS) for status in strip}
        toggle = automation.state()
        page(
            resp,
            "board.html",
            now=now,
            needs_you=self.board.needs_you_list(limit=100),
            agents=strip,
            history=history,
            automation_enabled=toggle.enabled,
            automation_changed=toggle,
            **signed_in(req),
            columns=self.board.columns(),
            stages=STAGES,
            writing_key=WRITING_TICKET_KEY,
        )


class NeedsYouFragment:
    """The Needs-you section alone, so the page can refresh it in place after the automation toggle."""

    operations = {"GET": _html("The Needs-you section of the board, as an HTML fragment")}

    def __init__(self, board, clock):
        self.board = board
        self.clock = clock

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        page(
            resp, "_needs_you.html", now=self.clock(), needs_you=self.board.needs_you_list(limit=100), **signed_in(req)
        )


class TicketPage:
    """A ticket, its timeline, and the router's latest decisions about it."""

    operations = {
        "GET": _html(
            "A ticket, its timeline and the router's latest decisions about it (an unknown key: a page saying so)",
            params=(
                Param("key", {"type": "string"}, location="path", required=True),
                Param("cursor", {"type": "string"}, "Older entries."),
            ),
            statuses=(200, 404),
        )
    }

    def __init__(self, board, router, clock):
        self.board = board
        self.router = router
        self.clock = clock

    def on_get(self, req: falcon.Request, resp: falcon.Response, key: str) -> None:
        try:
            ticket, _ = self.board.ticket(key)
        except NotFound:
            # A person following an old link reads a page, not a problem document; the router may still
            # have judged events about that key (a tracker issue that never became a ticket).
            page(resp, "no_ticket.html", now=self.clock(), key=key, **signed_in(req))
            resp.status = falcon.HTTP_404
            return
        entries, after = self.board.timeline(key, limit=50, cursor=req.get_param("cursor") or None)
        recent, more = self.router.decisions(
            limit=DECISIONS_ON_TICKET, cursor=None, outcome=None, source=None, subject_id=key, since=None
        )
        page(
            resp,
            "ticket.html",
            now=self.clock(),
            ticket=ticket,
            entries=entries,
            next_cursor=after,
            writing_key=WRITING_TICKET_KEY,
            decisions=[decisions.describe(row, {key}) for row in recent],
            more_decisions=more is not None,
            **signed_in(req),
        )


def _subject(req: falcon.Request) -> str | None:
    """The subject filter as typed: trimmed; a ticket key in any case is the key (tickets are upper case)."""
    raw = params.text(req, "subject_id", max_length=128)
    value = raw.strip() if raw else None
    if value and TICKET_KEY.match(value):
        return value.upper()
    return value or None


class DecisionsPage:
    """The shadow router's recorded decisions: a plain GET form filters them, keyset pages go back in time.

    It reads through `ShadowRouter.decisions`, the unit `GET /api/v1/router/decisions` uses.
    """

    operations = {
        "GET": _html(
            "The shadow router's decisions, newest first, filtered by outcome, source and subject",
            params=(
                Param("outcome", {"type": "string", "enum": ["", *OUTCOMES]}, "Empty for any outcome."),
                Param("source", {"type": "string", "enum": ["", *SOURCES]}, "Empty for any source."),
                Param(
                    "subject_id",
                    {"type": "string", "maxLength": 128},
                    "A ticket key (any case) or another subject id; empty for any.",
                ),
                CURSOR,
            ),
            statuses=(200, 400),
        )
    }

    def __init__(self, board, router, clock):
        self.board = board
        self.router = router
        self.clock = clock

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        filters = {
            "outcome": params.choice(req, "outcome", OUTCOMES),
            "source": params.choice(req, "source", SOURCES),
            "subject_id": _subject(req),
        }
        cursor = params.cursor(req)
        rows, after = self.router.decisions(limit=DECISIONS_PER_PAGE, cursor=cursor, since=None, **filters)
        on_board = self.board.on_board({row.subject_id for row in rows if row.subject_id})
        given = {name: value for name, value in filters.items() if value}
        page(
            resp,
            "decisions.html",
            now=self.clock(),
            filters=filters,
            filtered=bool(given),
            decisions=[decisions.describe(row, on_board) for row in rows],
            outcome_choices=decisions.OUTCOME_CHOICES,
            source_choices=decisions.SOURCE_CHOICES,
            older_url="/decisions?" + urlencode({**given, "cursor": after}) if after else None,
            newest_url=("/decisions?" + urlencode(given) if given else "/decisions") if cursor else None,
            **signed_in(req),
        )


class Static:
    """The board's CSS and JavaScript, from the installed package; only the files listed here are served."""

    FILES = {"board.css": "text/css; charset=utf-8", "board.js": "text/javascript; charset=utf-8"}
    operations = {
        "GET": Operation(
            "The board's stylesheet and script",
            responses={200: None, 404: "problem.json"},
            params=(Param("name", {"type": "string", "enum": sorted(FILES)}, location="path", required=True),),
            tags=("web board",),
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        if name not in self.FILES:
            raise falcon.HTTPNotFound()
        resp.content_type = self.FILES[name]
        resp.set_header("Cache-Control", "private, max-age=300")
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.data = resources.files("api.web").joinpath("static", name).read_bytes()


def routes(services) -> list[tuple[str, object]]:
    board, clock = services.board, services.clock
    return [
        ("/", BoardPage(board, clock)),
        ("/fragments/needs-you", NeedsYouFragment(board, clock)),
        ("/tickets/{key}", TicketPage(board, services.router, clock)),
        ("/decisions", DecisionsPage(board, services.router, clock)),
        ("/static/{name}", Static()),
    ]
