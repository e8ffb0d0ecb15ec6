"""Middleware: request ids and access logs, a database connection per request, the body limit, and the guard
that applies each operation's credentials, query parameters and body schema before its responder runs."""

from __future__ import annotations

import itertools
import json
import logging
import re
import secrets
import time
from urllib.parse import urlsplit

import falcon

from api.auth import Authenticator
from api.body import read_json, read_raw
from api.conditional import require_if_match
from api.errors import Problem
from api.operations import BASIC, IDENTIFIER, NO_WORKERS, WORKERS_ONLY, Operation, changes_something
from api.params import refuse_unknown
from domain.accounts import WORKER
from domain.identifiers import CONTROL, first_control
from domain.outage import DatabaseOutage
from storage.db import db

log = logging.getLogger("svc.access")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
# A request without a sane id of its own gets this process's random prefix and the next number: unique like a
# random id (32 hex characters), without asking the kernel for random bytes on every request.
_ID_PREFIX = secrets.token_hex(8)
_next_id = itertools.count(1).__next__


def refuse_cross_site(req: falcon.Request) -> None:
    """Browsers replay cached basic credentials on requests other sites make; refuse those (403), saying what did
    not match.

    Scripts and the CLI send no Origin; the web board's own requests are same-origin. Behind a reverse proxy the
    Host compared is the one the proxy passes on (or a trusted proxy's X-Forwarded-Host, `api/proxies.py`): a
    proxy that drops the browser's port (nginx's `$host`) makes every change on the board look cross-site.
    """
    site = req.get_header("Sec-Fetch-Site")
    origin = req.get_header("Origin")
    host = req.get_header("Host") or ""
    why = None
    if site == "cross-site":
        why = f"the browser marked it cross-site (Sec-Fetch-Site: cross-site; Origin {origin or 'not sent'})"
    elif origin == "null":
        why = "its Origin is null (a sandboxed frame, a file or a redirect from another site)"
    elif origin is not None and urlsplit(origin).netloc.lower() != host.lower():
        why = (
            f"its Origin {origin} is not this Host ({host or 'no Host header'}); behind a reverse proxy, pass on the "
            "Host the browser sent, port included (nginx: proxy_set_header Host $http_host)"
        )
    if why is not None:
        raise Problem(403, "cross-site", f"requests from another site may not change anything here: {why}")


# Path parameters that are numbers (a job's, a decision's id), not names.
_NUMBERED = frozenset({"job_id", "decision_id"})
_NO_CONTROL = IDENTIFIER["not"]
_NUL = re.compile("\x00")


def refuse_control_characters(req: falcon.Request, params: dict, operation: Operation) -> None:
    """No key, name or filter holds a control character (`domain/identifiers.py`): a path parameter holding one is a
    bad request (400), and so is a query parameter declared as an identifier, each naming the parameter; U+0000 in
    any query parameter (PostgreSQL cannot even compare text with it). A job's or a decision's id is a number, not a
    name: its responder answers anything but ASCII digits with 404, as for any id that names nothing."""
    for name, value in params.items():
        if isinstance(value, str) and name not in _NUMBERED and CONTROL.search(value):
            said = first_control(value)
            raise Problem(
                400,
                "bad-request",
                f"path parameter {name!r} holds the control character {said}; no identifier can",
                errors=[{"path": name, "message": f"holds the control character {said}"}],
            )
    # A query parameter declared as an identifier holds no control character; none holds U+0000. (Free text may hold
    # line breaks: a policy tried on the decisions page comes as a query.)
    identifiers = {p.name for p in operation.params if p.location == "query" and p.schema.get("not") == _NO_CONTROL}
    for name, value in req.params.items():
        values = value if isinstance(value, list) else [value]
        pattern = CONTROL if name in identifiers else _NUL
        bad = next((v for v in [name, *values] if isinstance(v, str) and pattern.search(v)), None)
        if bad is not None:
            shown = json.dumps(name)[1:-1]
            said = first_control(bad)
            raise Problem(
                400,
                "bad-query",
                f"query parameter {shown!r} holds the control character {said}",
                errors=[{"path": shown, "message": f"holds the control character {said}"}],
            )


WORKER_ENDPOINTS = (
    "POST dispatch/claim, POST dispatch/jobs/{id}/heartbeat, POST dispatch/jobs/{id}/result, and GET "
    "dispatch/jobs/{id} and GET tickets/{key} for the jobs it claimed and their tickets"
)


def refuse_out_of_role(role: str, actor: str, operation: Operation) -> None:
    """A worker account (a machine in a bay) calls only what is declared for workers; what is declared for workers
    only, nobody else calls (403 either way, saying why)."""
    if role == WORKER and operation.workers == NO_WORKERS:
        raise Problem(403, "worker", f"{actor} is a worker account: it may call only {WORKER_ENDPOINTS}")
    if role != WORKER and operation.workers == WORKERS_ONLY:
        raise Problem(
            403,
            "workers-only",
            f"only worker accounts call this, and {actor} is not one (add one: svc user add bay-1 --role worker)",
        )


class RequestContext:
    """Give every request an id (the caller's X-Request-Id if sane), return it, and log one line per request."""

    def __init__(self, observers=()):
        self.observers = list(observers)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        given = req.get_header("X-Request-Id")
        req.context.request_id = given if given and _REQUEST_ID.match(given) else f"{_ID_PREFIX}{_next_id():016x}"
        req.context.started = time.perf_counter()

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource, req_succeeded: bool) -> None:
        resp.set_header("X-Request-Id", req.context.request_id)
        elapsed = time.perf_counter() - req.context.started
        route = req.uri_template or "unmatched"
        status = resp.status_code if hasattr(resp, "status_code") else int(str(resp.status).split()[0])
        for observe in self.observers:
            observe(req.method, route, status, elapsed)
        log.info(
            "request",
            extra={
                "request_id": req.context.request_id,
                "method": req.method,
                "route": route,
                "status": status,
                "duration_ms": round(elapsed * 1000, 2),
                "client": req.remote_addr,
            },
        )


class DatabaseConnection:
    """At most one connection per request, returned to the pool at the end of it; and the end of an outage seen.

    It is taken when the request first touches the database (peewee connects on first use), not up front: on
    SQLite a write runs on the group-commit thread, so a notify or an event never needs one of its own. A request
    that changed something and succeeded shows the database takes writes again; one that read through a
    connection of its own shows it can be reached (`DatabaseOutage.recovered`).
    """

    def __init__(self, outage: DatabaseOutage):
        self.outage = outage

    def process_response(self, req, resp, resource, req_succeeded: bool) -> None:
        connected = not db.is_closed()
        if connected:
            db.close()
        if req_succeeded and self.outage.current is not None and resource is not None:
            wrote = changes_something(req.method)
            if wrote or connected:
                self.outage.recovered(wrote=wrote)


class Guard:
    """Refuse oversized bodies early, then check credentials, then read and validate the declared body."""

    def __init__(self, authenticator: Authenticator, max_body_bytes: int):
        self.authenticator = authenticator
        self.max_body_bytes = max_body_bytes

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.content_length is not None and req.content_length > self.max_body_bytes:
            raise Problem(413, "payload-too-large", f"the request body is larger than {self.max_body_bytes} bytes")

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource, params) -> None:
        if resource is None:
            return
        operations: dict[str, Operation] = getattr(resource, "operations", {})
        operation = operations.get(req.method)
        if operation is None:
            return  # Falcon answers 405 (or OPTIONS) itself
        req.context.operation = operation
        if operation.raw_body:
            # Webhook signatures are over the exact bytes, so they are read (within the limit) before the check.
            req.context.raw_body = read_raw(req, self.max_body_bytes)
        identity = req.context.identity = self.authenticator.check(req, operation.auth)
        refuse_out_of_role(identity.role, identity.actor, operation)
        if changes_something(req.method):
            if identity.scheme == BASIC:
                refuse_cross_site(req)
            if not identity.may_change and changes_something(req.method, operation):
                raise Problem(
                    403,
                    "viewer",
                    f"{identity.actor} has a viewer account: it may read everything and change nothing "
                    "(an operator can change it: svc user role NAME operator)",
                )
        refuse_control_characters(req, params, operation)
        # Every endpoint alike, from its own declaration: a new resource gets it for free.
        refuse_unknown(req, operation.query_names)
        if operation.if_match_required:
            require_if_match(req)
        if operation.raw_body:
            return
        if operation.request is not None:
            req.context.body = read_json(
                req,
                schema=operation.request_checked or operation.request,
                limit=self.max_body_bytes,
                optional=operation.request_optional,
            )
