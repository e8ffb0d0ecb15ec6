"""The board's pages. Like the API's resources, each reads through the units of work and renders."""

from __future__ import annotations

from importlib import resources

import falcon

from api.operations import Operation, Param
from api.web.render import page
from jobs import agents_strip
from machines.stages import STAGES, WRITING_TICKET_KEY
from storage import runs
from svc import automation

HTML = "text/html"
RECENT_RUNS = 20


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
        page(
            resp,
            "board.html",
            now=now,
            needs_you=self.board.needs_you_list(limit=100),
            agents=strip,
            history=history,
            automation_enabled=automation.is_enabled(),
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
        page(resp, "_needs_you.html", now=self.clock(), needs_you=self.board.needs_you_list(limit=100))


class TicketPage:
    operations = {
        "GET": _html(
            "A ticket and its timeline",
            params=(
                Param("key", {"type": "string"}, location="path", required=True),
                Param("cursor", {"type": "string"}, "Older entries."),
            ),
            statuses=(200, 404),
        )
    }

    def __init__(self, board, clock):
        self.board = board
        self.clock = clock

    def on_get(self, req: falcon.Request, resp: falcon.Response, key: str) -> None:
        ticket, _ = self.board.ticket(key)
        entries, after = self.board.timeline(key, limit=50, cursor=req.get_param("cursor") or None)
        page(
            resp,
            "ticket.html",
            now=self.clock(),
            ticket=ticket,
            entries=entries,
            next_cursor=after,
            writing_key=WRITING_TICKET_KEY,
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
        ("/tickets/{key}", TicketPage(board, clock)),
        ("/static/{name}", Static()),
    ]
