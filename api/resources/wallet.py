"""The wallet over HTTP (its row: `storage/wallet.py`): budget, spend, lock."""

from __future__ import annotations

import falcon

from api import representations
from api.operations import Operation


class Wallet:
    operations = {
        "GET": Operation("The wallet", responses={200: "wallet.json", 401: "problem.json"}, tags=("wallet",)),
        "PUT": Operation(
            "Set the wallet",
            request="wallet-put.json",
            responses={200: "wallet.json", 401: "problem.json", 422: "problem.json"},
            tags=("wallet",),
        ),
    }

    def __init__(self, board):
        self.board = board

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = representations.wallet(self.board.wallet())

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = representations.wallet(self.board.put_wallet(req.context.body, actor=req.context.identity.actor))


def routes(services) -> list[tuple[str, object]]:
    return [("/api/v1/wallet", Wallet(services.board))]
