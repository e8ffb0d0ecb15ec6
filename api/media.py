"""The API's JSON: written by orjson (several times faster than `json` on every answer), read by `json`.

orjson refuses what JSON allows and Python holds: integers beyond 64 bits (a rejected envelope is echoed back
as it came) and strings with lone surrogates (JSON's `\\ud800` escape). Those documents are written by `json`
instead, ASCII-escaped so that any string survives. Bodies are read by `json` (api/body.py), which keeps big
integers exact where orjson would turn them into floats.
"""

from __future__ import annotations

import json
from typing import Any

import falcon
import orjson


def dumps(document: Any) -> bytes:
    """`document` as compact UTF-8 JSON."""
    try:
        return orjson.dumps(document)
    except TypeError:  # orjson.JSONEncodeError: a big integer, a lone surrogate, a key that is not a string
        return json.dumps(document, separators=(",", ":")).encode()


def register(app: falcon.App) -> None:
    """Serialize every `resp.media` with `dumps` (requests are read by api/body.py, never through `req.media`)."""
    handler = falcon.media.JSONHandler(dumps=dumps, loads=json.loads)
    app.req_options.media_handlers[falcon.MEDIA_JSON] = handler
    app.resp_options.media_handlers[falcon.MEDIA_JSON] = handler
