"""The dispatch switch over HTTP (`domain/dispatch/switch.py`): `GET/PUT router/dispatch`. Everyone with
credentials reads it; an operator pauses (saying why) and resumes all live dispatch."""

from __future__ import annotations

import falcon

from api import representations
from api.operations import Operation
from domain.dispatch import switch
from domain.dispatch.jobs import Dispatch


class RouterDispatch:
    operations = {
        "GET": Operation(
            "The dispatch switch: whether live dispatch is paused, why, who changed it and when",
            responses={200: "router-dispatch.json"},
            tags=("router",),
        ),
        "PUT": Operation(
            "Pause (with a reason, required) or resume all live dispatch: while paused, a live rule's passing decision "
            "queues its job held (dispatched: false, held: true), no job is claimed, forge writes wait (forge.state: "
            "held), and the board says so on every page; resuming queues the held jobs, oldest first, and lets the "
            "writes go",
            request="router-dispatch-put.json",
            responses={200: "router-dispatch.json", 422: "problem.json"},
            tags=("router",),
        ),
    }

    def __init__(self, dispatch: Dispatch):
        self.dispatch = dispatch

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = representations.dispatch_switch(switch.read())

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = req.context.body
        changed = self.dispatch.set_switch(
            paused=body["paused"], reason=body.get("reason"), actor=req.context.identity.actor
        )
        resp.media = representations.dispatch_switch(changed)


def routes(services) -> list[tuple[str, object]]:
    return [("/api/v1/router/dispatch", RouterDispatch(services.dispatch))]
