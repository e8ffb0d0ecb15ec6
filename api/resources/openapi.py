"""GET /api/v1/openapi.json: the OpenAPI 3.1 document of every endpoint the app has."""

from __future__ import annotations

import falcon

from api import openapi_document as openapi
from api.operations import PUBLIC, Operation


class OpenAPIDocument:
    operations = {
        "GET": Operation("This OpenAPI 3.1 document", auth=PUBLIC, responses={200: None}, tags=("service",)),
    }

    def __init__(self, routes: list[tuple[str, object]]):
        self.routes = routes  # the app's full route list; filled in by create_app before the first request
        self._document = None

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self._document is None:  # routes are fixed once the app is built, so build the document once
            self._document = openapi.build(self.routes)
        resp.media = self._document


def routes(services) -> list[tuple[str, object]]:
    return [("/api/v1/openapi.json", OpenAPIDocument(services.routes))]
