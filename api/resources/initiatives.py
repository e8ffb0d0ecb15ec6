"""Initiatives over HTTP (rows in `storage/initiatives.py`): create, list, change stage."""

from __future__ import annotations

import falcon

from api import conditional, params, representations
from api.operations import CURSOR, IDENTIFIER, LIMIT, Operation, Param
from domain.entity_tags import initiative_tag


class Initiatives:
    operations = {
        "GET": Operation(
            "List initiatives, by id",
            responses={200: "initiative-list.json", 400: "problem.json", 401: "problem.json"},
            params=(LIMIT, CURSOR),
            tags=("board",),
        ),
        "POST": Operation(
            "Create an initiative (stage defaults to agree)",
            request="initiative-create.json",
            responses={201: "initiative.json", 401: "problem.json", 409: "problem.json", 422: "problem.json"},
            tags=("board",),
        ),
    }

    def __init__(self, board):
        self.board = board

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        rows, after = self.board.initiatives(limit=params.limit(req), cursor=params.cursor(req))
        resp.media = representations.page("initiatives", [representations.initiative(r) for r in rows], after)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        row = self.board.create_initiative(req.context.body, actor=req.context.identity.actor)
        resp.status = falcon.HTTP_201
        resp.location = f"/api/v1/initiatives/{row.id}"
        resp.media = representations.initiative(row)


_ID = Param("initiative_id", IDENTIFIER, location="path", required=True)


class InitiativeItem:
    operations = {
        "GET": Operation(
            "An initiative",
            responses={200: "initiative.json", 401: "problem.json", 404: "problem.json"},
            params=(_ID,),
            tags=("board",),
            etag=True,
        ),
        "PATCH": Operation(
            "Change an initiative's stage or name",
            request="initiative-patch.json",
            responses={200: "initiative.json", 401: "problem.json", 404: "problem.json", 422: "problem.json"},
            params=(_ID,),
            tags=("board",),
            if_match=True,
        ),
    }

    def __init__(self, board):
        self.board = board

    def on_get(self, req: falcon.Request, resp: falcon.Response, initiative_id: str) -> None:
        self._answer(resp, self.board.initiative(initiative_id))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, initiative_id: str) -> None:
        row = self.board.update_initiative(
            initiative_id, req.context.body, actor=req.context.identity.actor, if_match=conditional.if_match(req)
        )
        self._answer(resp, row)

    @staticmethod
    def _answer(resp: falcon.Response, row) -> None:
        conditional.tag(resp, initiative_tag(row))
        resp.media = representations.initiative(row)


def routes(services) -> list[tuple[str, object]]:
    return [
        ("/api/v1/initiatives", Initiatives(services.board)),
        ("/api/v1/initiatives/{initiative_id}", InitiativeItem(services.board)),
    ]
