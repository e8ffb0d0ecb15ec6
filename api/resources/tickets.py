"""Tickets over HTTP (rows in `storage/tickets.py`): create, list, read, timeline, and the stage actions."""

from __future__ import annotations

import falcon

from api import conditional, params, representations
from api.operations import CURSOR, IDENTIFIER, LIMIT, WORKERS_TOO, Operation, Param
from domain.accounts import WORKER
from domain.entity_tags import ticket_tag
from machines.stages import STAGES

_KEY = Param("key", IDENTIFIER, "Ticket key, e.g. PORT-12.", location="path", required=True)
_ACTION_ERRORS = {401: "problem.json", 404: "problem.json", 409: "problem.json", 422: "problem.json"}


def _answer(resp: falcon.Response, row) -> None:
    """A ticket as a change answers it, with its new `ETag`."""
    conditional.tag(resp, ticket_tag(row))
    resp.media = representations.ticket(row)


class Tickets:
    operations = {
        "GET": Operation(
            "List tickets, filtered; ordered by key",
            responses={200: "ticket-list.json", 400: "problem.json", 401: "problem.json"},
            params=(
                Param("stage", {"type": "string", "enum": list(STAGES)}),
                Param("initiative_id", IDENTIFIER),
                Param("needs_you", {"type": "boolean"}, "Only tickets a human must act on."),
                LIMIT,
                CURSOR,
            ),
            tags=("board",),
        ),
        "POST": Operation(
            "Create a ticket (the client picks the key)",
            request="ticket-create.json",
            responses={
                201: "ticket.json",
                401: "problem.json",
                404: "problem.json",
                409: "problem.json",
                422: "problem.json",
            },
            tags=("board",),
        ),
    }

    def __init__(self, board):
        self.board = board

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        rows, after = self.board.tickets(
            limit=params.limit(req),
            cursor=params.cursor(req),
            stage=params.choice(req, "stage", STAGES),
            initiative_id=params.text(req, "initiative_id", max_length=64),
            needs_you=params.boolean(req, "needs_you"),
        )
        resp.media = representations.page("tickets", [representations.ticket(r) for r in rows], after)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        row = self.board.create_ticket(req.context.body, actor=req.context.identity.actor)
        resp.status = falcon.HTTP_201
        resp.location = f"/api/v1/tickets/{row.key}"
        resp.media = representations.ticket(row)


class TicketItem:
    operations = {
        "GET": Operation(
            "A ticket with its newest 20 timeline entries (a worker: only the ticket of a job it claimed, and without "
            "its timeline)",
            responses={200: "ticket-detail.json", 401: "problem.json", 403: "problem.json", 404: "problem.json"},
            params=(_KEY,),
            tags=("board",),
            etag=True,
            workers=WORKERS_TOO,
        ),
    }

    def __init__(self, board, dispatch=None):
        self.board = board
        self.dispatch = dispatch

    def on_get(self, req: falcon.Request, resp: falcon.Response, key: str) -> None:
        identity = req.context.identity
        if identity.role == WORKER:
            # A worker reads the ticket of its job, not what people wrote on its timeline.
            self.dispatch.check_worker_reads_ticket(identity.actor, key)
            row, _ = self.board.ticket(key, with_timeline=False)
            conditional.tag(resp, ticket_tag(row))
            resp.media = representations.ticket(row)
            return
        row, entries = self.board.ticket(key)
        conditional.tag(resp, ticket_tag(row))
        resp.media = representations.ticket_detail(row, entries)


class TicketTimeline:
    operations = {
        "GET": Operation(
            "A ticket's timeline, newest first",
            responses={200: "timeline-page.json", 400: "problem.json", 401: "problem.json", 404: "problem.json"},
            params=(_KEY, LIMIT, CURSOR),
            tags=("board",),
        ),
    }

    def __init__(self, board):
        self.board = board

    def on_get(self, req: falcon.Request, resp: falcon.Response, key: str) -> None:
        entries, after = self.board.timeline(key, limit=params.limit(req), cursor=params.cursor(req))
        resp.media = representations.page("entries", [representations.timeline_entry(e) for e in entries], after)


class TicketMove:
    operations = {
        "POST": Operation(
            "Move a ticket to another stage (the generic stage machine decides)",
            request="ticket-move.json",
            responses={200: "ticket.json", **_ACTION_ERRORS},
            params=(_KEY,),
            tags=("board",),
            if_match=True,
        ),
    }

    def __init__(self, board):
        self.board = board

    def on_post(self, req: falcon.Request, resp: falcon.Response, key: str) -> None:
        row = self.board.move(
            key, req.context.body, actor=req.context.identity.actor, if_match=conditional.if_match(req)
        )
        _answer(resp, row)


class TicketFinish:
    """`mark_done` or `cancel`: a ticket to its final stage from any live stage, its slot released."""

    SUMMARIES = {
        "mark_done": (
            "Mark a ticket done from any live stage; its slot is released and (PORT- tickets) its tracker item closed"
        ),
        "cancel": "Cancel a ticket from any live stage; its slot is released",
    }

    def __init__(self, board, action: str):
        self.finish = getattr(board, action)
        self.operations = {
            "POST": Operation(
                self.SUMMARIES[action],
                request="ticket-action.json",
                request_optional=True,
                responses={200: "ticket.json", **_ACTION_ERRORS},
                params=(_KEY,),
                tags=("board",),
                if_match=True,
            ),
        }

    def on_post(self, req: falcon.Request, resp: falcon.Response, key: str) -> None:
        row = self.finish(key, req.context.body, actor=req.context.identity.actor, if_match=conditional.if_match(req))
        _answer(resp, row)


def routes(services) -> list[tuple[str, object]]:
    board = services.board
    return [
        ("/api/v1/tickets", Tickets(board)),
        ("/api/v1/tickets/{key}", TicketItem(board, services.dispatch)),
        ("/api/v1/tickets/{key}/timeline", TicketTimeline(board)),
        ("/api/v1/tickets/{key}/move", TicketMove(board)),
        ("/api/v1/tickets/{key}/mark_done", TicketFinish(board, "mark_done")),
        ("/api/v1/tickets/{key}/cancel", TicketFinish(board, "cancel")),
    ]
