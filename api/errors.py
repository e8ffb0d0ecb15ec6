"""The one place where errors become HTTP: each error of `domain/errors.py` maps to a status; all are problem+json."""

from __future__ import annotations

import logging

import falcon

from api import media
from api.params import UnknownParameters
from api.web import render
from contracts import ContractViolation
from domain.clock import iso
from domain.errors import (
    Conflict,
    Forbidden,
    IdempotencyMismatch,
    InvalidQuery,
    NotEarned,
    NotFound,
    PreconditionFailed,
    StaleDelivery,
    TransitionForbidden,
)
from domain.outage import RETRY_AFTER_SECONDS, DatabaseOutage
from storage.db import outage_cause
from storage.paging import InvalidCursor

log = logging.getLogger("svc.api")

PROBLEM_BASE = "https://svc.invalid/problems/"
PROBLEM_JSON = "application/problem+json"


class Problem(falcon.HTTPError):
    """An HTTP error carrying RFC 9457 members: a problem type, a detail, and optional located `errors`."""

    def __init__(self, status: int, kind: str, detail: str, *, errors=None, headers=None, extra=None):
        super().__init__(falcon.code_to_http_status(status), title=_title(status), description=detail, headers=headers)
        self.kind = kind
        self.errors = errors
        self.extra = extra or {}

    def to_problem(self) -> dict:
        body = {
            "type": PROBLEM_BASE + self.kind,
            "title": self.title,
            "status": self.status_code,
            "detail": self.description,
        }
        if self.errors is not None:
            body["errors"] = self.errors
        body.update(self.extra)
        return body


def _title(status: int) -> str:
    return falcon.code_to_http_status(status).split(" ", 1)[1]


_FALCON_KINDS = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    406: "not-acceptable",
    409: "conflict",
    411: "length-required",
    412: "precondition-failed",
    413: "payload-too-large",
    415: "unsupported-media-type",
    422: "validation",
    429: "too-many-requests",
    431: "headers-too-large",
    500: "internal",
    503: "unavailable",
}
DATABASE_UNAVAILABLE = "database-unavailable"


def serialize(req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError) -> None:
    """Falcon's error serializer: every HTTPError, ours or Falcon's own, leaves as problem+json."""
    if isinstance(exc, Problem):
        body = exc.to_problem()
    else:
        status = exc.status_code
        body = {
            "type": PROBLEM_BASE + _FALCON_KINDS.get(status, "error"),
            "title": _title(status),
            "status": status,
            "detail": exc.description or _title(status),
        }
    resp.content_type = PROBLEM_JSON
    resp.data = media.dumps(body)


def _not_found(req, resp, exc: NotFound, params):
    errors = [{"path": exc.path, "message": f"no {exc.what} {exc.ident!r}"}] if exc.path else None
    raise Problem(404, "not-found", str(exc), errors=errors)


def _conflict(req, resp, exc: Conflict, params):
    extra = {"current_stage": exc.current_stage} if exc.current_stage else None
    raise Problem(409, "conflict", str(exc), extra=extra)


def _not_earned(req, resp, exc: NotEarned, params):
    raise Problem(409, "not-earned", str(exc), extra={"evidence": exc.evidence})


def _forbidden(req, resp, exc: Forbidden, params):
    raise Problem(403, "forbidden", str(exc))


def _forbidden_transition(req, resp, exc: TransitionForbidden, params):
    detail = f"{exc} (current stage: {exc.current})"
    raise Problem(409, "transition-forbidden", detail, extra={"current_stage": exc.current})


def _precondition_failed(req, resp, exc: PreconditionFailed, params):
    extra = {
        "current": exc.current,
        "etag": exc.etag,
        "last_change": exc.last_change,
        "changed_by": exc.changed_by,
        "changed_at": iso(exc.changed_at),
    }
    if "stage" in exc.current:
        extra["current_stage"] = exc.current["stage"]
    raise Problem(412, "precondition-failed", str(exc), extra=extra, headers={"ETag": exc.etag})


def _contract(req, resp, exc: ContractViolation, params):
    errors = [v.as_dict() for v in exc.violations]
    count = len(errors)
    raise Problem(422, "validation", f"the request body breaks its contract in {count} place(s)", errors=errors)


def _invalid_query(req, resp, exc: InvalidQuery, params):
    raise Problem(400, "bad-query", str(exc), errors=[{"path": exc.parameter, "message": str(exc)}])


def _unknown_parameters(req, resp, exc: UnknownParameters, params):
    operation = getattr(req.context, "operation", None)
    if operation is not None and operation.content_type == render.HTML:
        render.refused_query(req, resp, exc)  # a person reads a page saying so, not a problem document
        return
    raise Problem(400, "bad-query", str(exc), errors=exc.errors())


def _invalid_cursor(req, resp, exc: InvalidCursor, params):
    raise Problem(400, "bad-query", f"cursor: {exc}", errors=[{"path": "cursor", "message": str(exc)}])


def _idempotency(req, resp, exc: IdempotencyMismatch, params):
    raise Problem(422, "idempotency-key-reused", str(exc), errors=[{"path": "", "message": str(exc)}])


def _stale_delivery(req, resp, exc: StaleDelivery, params):
    # 401, like a bad signature, but deliberately not counted towards the failed-credentials lockout: the
    # signature was right, so nobody is guessing the secret, and a lockout would turn a burst of late but
    # genuine deliveries (the sender's retries after an outage here, or its clock adrift) into 429s for every
    # fresh delivery from the sender's addresses. Refusing costs a replayer as much as the lockout would.
    raise Problem(401, "stale-delivery", str(exc))


def _unexpected(outage: DatabaseOutage):
    def handle(req, resp, exc: Exception, params):
        """A database that cannot be reached or cannot take the write is an outage: 503 with `Retry-After`, its
        first cause logged once per outage (`DatabaseOutage`). Anything else is a bug: 500, logged each time."""
        if isinstance(exc, falcon.HTTPError):
            raise exc
        found = outage_cause(exc)
        if found is not None:
            outage.failed(*found)
            raise Problem(
                503,
                DATABASE_UNAVAILABLE,
                "the database cannot be reached or cannot take a write just now; retry after the Retry-After "
                "seconds (with the same Idempotency-Key, where the request has one)",
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        log.exception("unhandled error", extra={"request_id": getattr(req.context, "request_id", None)})
        raise Problem(500, "internal", "the service failed to answer; the error is logged with this request's id")

    return handle


def register(app: falcon.App, outage: DatabaseOutage) -> None:
    """Install the error mapping and the problem+json serializer on `app`."""
    app.set_error_serializer(serialize)
    # Falcon picks the most specific registered handler, so the order here does not matter.
    app.add_error_handler(Exception, _unexpected(outage))
    app.add_error_handler(NotFound, _not_found)
    app.add_error_handler(Conflict, _conflict)
    app.add_error_handler(NotEarned, _not_earned)
    app.add_error_handler(Forbidden, _forbidden)
    app.add_error_handler(TransitionForbidden, _forbidden_transition)
    app.add_error_handler(PreconditionFailed, _precondition_failed)
    app.add_error_handler(ContractViolation, _contract)
    app.add_error_handler(InvalidQuery, _invalid_query)
    app.add_error_handler(UnknownParameters, _unknown_parameters)
    app.add_error_handler(InvalidCursor, _invalid_cursor)
    app.add_error_handler(IdempotencyMismatch, _idempotency)
    app.add_error_handler(StaleDelivery, _stale_delivery)
