"""The wallet over HTTP (its row: `storage/wallet.py`): budget, spend, lock."""

from __future__ import annotations

import falcon

from api import conditional, representations
from api.operations import Operation
from domain.entity_tags import wallet_tag


class Wallet:
    operations = {
        "GET": Operation(
            "The wallet", responses={200: "wallet.json", 401: "problem.json"}, tags=("wallet",), etag=True
        ),
        "PUT": Operation(
            "Set the wallet",
            request="wallet-put.json",
            responses={200: "wallet.json", 401: "problem.json", 422: "problem.json"},
            tags=("wallet",),
            if_match=True,
        ),
    }

    def __init__(self, board):
        self.board = board

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._answer(resp, self.board.wallet())

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        row = self.board.put_wallet(
            req.context.body, actor=req.context.identity.actor, if_match=conditional.if_match(req)
        )
        self._answer(resp, row)

    @staticmethod
    def _answer(resp: falcon.Response, row) -> None:
        conditional.tag(resp, wallet_tag(row))
        resp.media = representations.wallet(row)


def routes(services) -> list[tuple[str, object]]:
    return [("/api/v1/wallet", Wallet(services.board))]
