"""GET /healthz: is the database answering."""

from __future__ import annotations

import falcon

from api.operations import PUBLIC, Operation
from storage.db import ping


class Health:
    operations = {
        "GET": Operation(
            "Health: the database answers",
            auth=PUBLIC,
            responses={200: "health.json", 503: "health.json"},
            tags=("service",),
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        ok, detail = ping()
        resp.status = falcon.HTTP_200 if ok else falcon.HTTP_503
        resp.media = {"status": "ok" if ok else "failing", "checks": {"database": {"ok": ok, "detail": detail}}}


def routes(services) -> list[tuple[str, object]]:
    return [("/healthz", Health())]
