"""Slots (bays) over HTTP (rows in `storage/slots.py`): list them, claim one for a ticket."""

from __future__ import annotations

import falcon

from api import representations
from api.operations import Operation, Param


class Slots:
    operations = {
        "GET": Operation(
            "Every slot, free ones included", responses={200: "slot-list.json", 401: "problem.json"}, tags=("slots",)
        ),
    }

    def __init__(self, board):
        self.board = board

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"slots": [representations.slot(v) for v in self.board.slots()]}


class SlotClaim:
    operations = {
        "POST": Operation(
            "Claim a slot for a ticket (the slot is created on first use); a slot held by another ticket is 409",
            request="slot-claim.json",
            responses={
                200: "slot.json",
                401: "problem.json",
                404: "problem.json",
                409: "problem.json",
                422: "problem.json",
            },
            params=(
                Param(
                    "name",
                    {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"},
                    location="path",
                    required=True,
                ),
            ),
            tags=("slots",),
        ),
    }

    def __init__(self, board):
        self.board = board

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        view = self.board.claim_slot(name, req.context.body, actor=req.context.identity.actor)
        resp.media = representations.slot(view)


def routes(services) -> list[tuple[str, object]]:
    return [
        ("/api/v1/slots", Slots(services.board)),
        ("/api/v1/slots/{name}/claim", SlotClaim(services.board)),
    ]
