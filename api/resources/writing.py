"""The writing agent over HTTP (`domain/writing.py` does the work): notify reports, the automation toggle, config."""

from __future__ import annotations

import re

import falcon

from api import conditional, representations
from api.errors import Problem
from api.operations import BASIC, CI, CI_OR_BASIC, Operation
from domain.entity_tags import automation_tag

IDEMPOTENCY_HEADER = "Idempotency-Key"
_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")


def idempotency_key(req: falcon.Request) -> str | None:
    """The request's `Idempotency-Key` (1 to 200 visible ASCII characters), or None when it sent none."""
    given = req.get_header(IDEMPOTENCY_HEADER)
    if given is None:
        return None
    if not _KEY.match(given):
        raise Problem(
            400,
            "bad-request",
            f"{IDEMPOTENCY_HEADER} must be 1 to 200 visible ASCII characters",
            errors=[{"path": IDEMPOTENCY_HEADER, "message": "1 to 200 visible ASCII characters"}],
        )
    return given


class WritingNotify:
    operations = {
        "POST": Operation(
            "Report a writing status: moves WRITING-DAILY, writes its receipt, records a writing-daily run and "
            "queues the chat post, in one transaction",
            auth=CI,
            request="writing-notify.json",
            responses={200: "writing-notify-result.json", 400: "problem.json", 409: "problem.json"},
            idempotent_key=True,
            tags=("writing",),
        ),
    }

    def __init__(self, writing):
        self.writing = writing

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        report, replayed = self.writing.notify(
            req.context.body, actor=req.context.identity.actor, idempotency_key=idempotency_key(req)
        )
        if replayed:
            resp.set_header("Idempotent-Replayed", "true")
        # Built after the commit: on SQLite the unit of work runs on the one writer thread every write waits for.
        resp.media = representations.writing_report(report)


class WritingAutomation:
    operations = {
        "GET": Operation(
            "Whether writing automation is on (it is by default)",
            auth=CI_OR_BASIC,
            responses={200: "writing-automation.json"},
            tags=("writing",),
            etag=True,
        ),
        "POST": Operation(
            "Turn writing automation on or off; the change is audited on the WRITING-DAILY timeline",
            auth=BASIC,
            request="writing-automation-set.json",
            responses={200: "writing-automation.json", 409: "problem.json"},
            tags=("writing",),
            if_match=True,
        ),
    }

    def __init__(self, writing):
        self.writing = writing

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._answer(resp, self.writing.automation())

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        state = self.writing.set_automation(
            req.context.body["enabled"], actor=req.context.identity.actor, if_match=conditional.if_match(req)
        )
        self._answer(resp, state)

    @staticmethod
    def _answer(resp: falcon.Response, state) -> None:
        conditional.tag(resp, automation_tag(state))
        resp.media = representations.writing_automation(state)


class WritingConfig:
    operations = {
        "GET": Operation(
            "What the content repository's writing jobs need: automation, articles per day, notify URL, schedule",
            auth=CI,
            responses={200: "writing-config.json"},
            tags=("writing",),
        ),
    }

    def __init__(self, writing):
        self.writing = writing

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self.writing.content_repo_config()


def routes(services) -> list[tuple[str, object]]:
    return [
        ("/api/v1/agents/writing/notify", WritingNotify(services.writing)),
        ("/api/v1/agents/writing/automation", WritingAutomation(services.writing)),
        ("/api/v1/agents/writing/config", WritingConfig(services.writing)),
    ]
