"""Normalized events: `POST events` (envelopes), the forge, CI and tracker webhooks, and the recorded decisions.

Each accepted event answers 202 with its decision; the same event id again answers 200 with the decision
already recorded. An envelope that breaks the contract answers 422 and is recorded as a `rejected` decision.
A batch (`{"events": [...]}`, at most 500) answers 200 with one result per envelope, each with the status it
would have had alone.
"""

from __future__ import annotations

from typing import Any

import falcon

from api import params, representations
from api.body import is_json_media, media_type, parse_form_payload, parse_json
from api.errors import Problem
from api.operations import (
    CI,
    CURSOR,
    FORGE_SIGNATURE,
    FORM_PAYLOAD,
    IDENTIFIER,
    JSON,
    LIMIT,
    TRACKER_SIGNATURE,
    Operation,
    Param,
)
from domain.router import deliveries
from domain.router.routing import OUTCOMES, SOURCES, Ignored, Intake, Receipt, Router

_ENVELOPE_ERRORS = {401: "problem.json", 422: "problem.json"}
# What became of an envelope, as the status it answers with (alone, or as one result of a batch).
STATUS = {Intake.ACCEPTED: 202, Intake.DUPLICATE: 200, Intake.REJECTED: 422}
_HTTP_STATUS = {intake: falcon.code_to_http_status(code) for intake, code in STATUS.items()}


def accepted(receipt: Receipt) -> dict[str, Any]:
    decision = None if receipt.decision is None else representations.decision(receipt.decision)
    return {"event_id": receipt.event_id, "decision": decision}


def answer(resp: falcon.Response, receipt: Receipt) -> None:
    """202 new, 200 seen before, or 422 problem+json carrying the rejected decision that was recorded."""
    if receipt.intake is Intake.REJECTED:
        errors = receipt.decision.errors or []
        raise Problem(
            STATUS[Intake.REJECTED],
            "validation",
            f"the envelope breaks svc.normalized-event/v0 in {len(errors)} place(s); recorded as rejected",
            errors=errors,
            extra={"decision": representations.decision(receipt.decision)},
        )
    resp.status = _HTTP_STATUS[receipt.intake]
    resp.media = accepted(receipt)


class Events:
    operations = {
        "POST": Operation(
            'Route one svc.normalized-event/v0 envelope, or a batch {"events": [...]} of at most 500 '
            "(each decision is recorded; a live rule's passing decision queues a job, and an event about a ticket's "
            "pull request or its pipeline moves the ticket)",
            auth=CI,
            request="event-request.json",
            request_checked="event-submission.json",
            responses={202: "event-accepted.json", 200: "event-answer.json", **_ENVELOPE_ERRORS},
            tags=("router",),
        ),
    }

    def __init__(self, router: Router):
        self.router = router

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = req.context.body
        if "events" in body and "schema" not in body:
            receipts = self.router.receive_batch(body["events"])
            resp.media = {
                "results": [
                    {
                        "index": index,
                        "status": STATUS[r.intake],
                        "event_id": r.event_id,
                        "decision": None if r.decision is None else representations.decision(r.decision),
                    }
                    for index, r in enumerate(receipts)
                ],
                "accepted": sum(r.intake is Intake.ACCEPTED for r in receipts),
                "duplicates": sum(r.intake is Intake.DUPLICATE for r in receipts),
                "rejected": sum(r.intake is Intake.REJECTED for r in receipts),
            }
            return
        answer(resp, self.router.receive(body))


class Webhook:
    """One inbound webhook endpoint; the sender, and with it the normalizer, is the one whose credential verified
    the delivery."""

    def __init__(self, router: Router, endpoint: str, operation: Operation):
        self.router = router
        self.endpoint = endpoint
        self.operations = {"POST": operation}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = req.context.raw_body
        accepted_media = self.operations["POST"].request_media
        if is_json_media(req.content_type):
            document = parse_json(raw)
        elif media_type(req.content_type) == FORM_PAYLOAD and FORM_PAYLOAD in accepted_media:
            # GitHub's other content type; the signature was checked over these very bytes.
            document = parse_form_payload(raw)
        else:
            raise Problem(415, "unsupported-media-type", f"send the webhook body as {' or '.join(accepted_media)}")
        headers = {name.lower(): value for name, value in req.headers.items()}
        delivery = deliveries.Delivery(
            endpoint=self.endpoint,
            sender=deliveries.sender_of(self.endpoint, req.context.identity.actor, headers, document),
            headers=headers,
            raw=raw,
            document=document,
        )
        result = self.router.receive_delivery(delivery)
        if isinstance(result, Ignored):
            resp.media = {"ignored": result.reason, "delivery": result.delivery}
            return
        answer(resp, result)


def _webhook_operation(
    summary: str, auth: str, *, media: tuple[str, ...] = (JSON,), unauthorized: str | None = None
) -> Operation:
    return Operation(
        summary,
        auth=auth,
        request="webhook-payload.json",  # documented only: the responder reads and normalizes the raw bytes
        raw_body=True,
        request_media=media,
        responses={202: "event-accepted.json", 200: "webhook-answer.json", **_ENVELOPE_ERRORS},
        response_notes={401: unauthorized} if unauthorized else {},
        tags=("router",),
    )


# `?include=own`: the service's own events' decisions, left out otherwise.
INCLUDE_OWN = "own"


class Decisions:
    operations = {
        "GET": Operation(
            "Recorded router decisions, newest first; the service's own (outcome own: its board events by the system "
            "or a worker, the forge events of its own forge account) only with include=own, or asked for by outcome",
            responses={200: "router-decision-list.json", 400: "problem.json", 401: "problem.json"},
            params=(
                Param("outcome", {"type": "string", "enum": list(OUTCOMES)}),
                Param("include", {"type": "string", "enum": [INCLUDE_OWN]}, "own: the service's own events too."),
                Param("source", {"type": "string", "enum": list(SOURCES)}),
                Param("subject_id", {**IDENTIFIER, "maxLength": 128}, "A ticket key, for example PORT-12."),
                Param("since", {"type": "string", "format": "date-time"}, "Only decisions evaluated at or after."),
                LIMIT,
                CURSOR,
            ),
            tags=("router",),
        ),
    }

    def __init__(self, router: Router):
        self.router = router

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        rows, after = self.router.decisions(
            limit=params.limit(req),
            cursor=params.cursor(req),
            outcome=params.choice(req, "outcome", OUTCOMES),
            source=params.choice(req, "source", SOURCES),
            subject_id=params.text(req, "subject_id", max_length=128),
            since=params.timestamp(req, "since"),
            include_own=params.choice(req, "include", (INCLUDE_OWN,)) == INCLUDE_OWN,
        )
        resp.media = representations.page("decisions", [representations.decision(r) for r in rows], after)


def routes(services) -> list[tuple[str, object]]:
    router = services.router
    return [
        ("/api/v1/events", Events(router)),
        (
            "/api/v1/webhooks/forge",
            Webhook(
                router,
                "forge",
                _webhook_operation(
                    "GitHub (pull_request, workflow_run) or GitLab (Merge Request Hook, Pipeline Hook) deliveries, "
                    "signed with X-Hub-Signature-256 or X-Gitlab-Token. GitHub may send JSON or, form-encoded, "
                    "the JSON in a `payload` field; either way the signature is over the bytes as sent",
                    FORGE_SIGNATURE,
                    media=(JSON, FORM_PAYLOAD),
                    unauthorized="A missing or wrong X-Hub-Signature-256 or X-Gitlab-Token; nothing is recorded",
                ),
            ),
        ),
        (
            "/api/v1/webhooks/ci",
            Webhook(
                router,
                "ci",
                _webhook_operation(
                    "CI-to-service reports in GitLab's pipeline-event or GitHub's workflow_run shape (CI secret)", CI
                ),
            ),
        ),
        (
            "/api/v1/webhooks/tracker",
            Webhook(
                router,
                "tracker",
                _webhook_operation(
                    "Linear Issue webhooks, signed with Linear-Signature; the signed webhookTimestamp must be "
                    "within SVC_WEBHOOK_TOLERANCE_SECONDS (default 60) of the server's clock",
                    TRACKER_SIGNATURE,
                    unauthorized=(
                        "A missing or wrong Linear-Signature, or a stale delivery: its signed webhookTimestamp is "
                        "missing or further than SVC_WEBHOOK_TOLERANCE_SECONDS (default 60) from the server's clock "
                        "(problem type stale-delivery; a possible replay). Nothing is recorded."
                    ),
                ),
            ),
        ),
        ("/api/v1/router/decisions", Decisions(router)),
    ]
