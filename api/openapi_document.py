"""The OpenAPI 3.1 document, built from the app's own routes and their declared operations.

Request and response schemas are the files of `contracts/`, placed under `components/schemas` with their
cross-file `$ref`s rewritten to point there.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import falcon
import falcon.inspect

import contracts
from api import conditional
from api.auth import FAILURE_LIMIT, WINDOW
from api.operations import (
    BASIC,
    CI,
    CI_OR_BASIC,
    FORGE_SIGNATURE,
    FORM_PAYLOAD,
    NO_WORKERS,
    PUBLIC,
    TRACKER_SIGNATURE,
    WORKERS_ONLY,
    Operation,
    changes_something,
)
from domain import __version__

_SECURITY = {
    PUBLIC: [],
    BASIC: [{"basic": []}],
    CI: [{"ciSecret": []}],
    CI_OR_BASIC: [{"ciSecret": []}, {"basic": []}],
    FORGE_SIGNATURE: [{"forgeSignature": []}, {"gitlabToken": []}],
    TRACKER_SIGNATURE: [{"trackerSignature": []}],
}


def component_name(schema_file: str) -> str:
    return schema_file.removesuffix(".json")


def _rewrite_refs(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                out[key] = _ref_target(value)
            elif key in {"$id", "$schema"}:
                continue
            else:
                out[key] = _rewrite_refs(value)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(v) for v in node]
    return node


def _ref_target(ref: str) -> str:
    ref = ref.removeprefix(contracts.BASE_URI)
    file, _, fragment = ref.partition("#")
    if not file:
        return "#" + fragment  # stays inside the same component; fixed up by the caller
    name = component_name(file)
    if fragment.startswith("/$defs/"):
        return f"#/components/schemas/{name}__{fragment.removeprefix('/$defs/')}"
    return f"#/components/schemas/{name}"


@functools.cache
def _components() -> dict[str, Any]:
    """Every contract as a component schema. The contracts are files shipped with the code, so this is made once
    per process; each document takes a copy."""
    schemas: dict[str, Any] = {}
    for file in contracts.schema_names():
        document = copy.deepcopy(contracts.load(file))
        name = component_name(file)
        defs = document.pop("$defs", {})
        for def_name, definition in defs.items():
            schemas[f"{name}__{def_name}"] = _local_refs(_rewrite_refs(definition), name)
        if set(document) - {"$schema", "$id", "title", "description"}:
            schemas[name] = _local_refs(_rewrite_refs(document), name)
    return schemas


def _local_refs(node: Any, name: str) -> Any:
    """`#/$defs/x` inside component `name` becomes `#/components/schemas/name__x`."""
    if isinstance(node, dict):
        return {
            k: (
                f"#/components/schemas/{name}__{v.removeprefix('#/$defs/')}"
                if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/")
                else _local_refs(v, name)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_local_refs(v, name) for v in node]
    return node


LOCKOUT_DESCRIPTION = (
    f"Too Many Requests: {FAILURE_LIMIT} failed credentials (wrong ones: a request without any is only challenged) "
    f"from this client address within {WINDOW:g} seconds lock the address out of every operation that takes "
    "credentials, the right ones included, until the window has passed (`Retry-After`)."
)


def _operation_doc(op: Operation, method: str, path: str) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "summary": op.summary,
        "operationId": _operation_id(op, method, path),
        "security": _SECURITY[op.auth],
        "responses": {},
    }
    if op.tags:
        doc["tags"] = list(op.tags)
    if op.changes_nothing:
        # A POST that only computes an answer: a viewer may use it (clients and the tests read this).
        doc["x-svc-changes-nothing"] = True
    if op.workers != NO_WORKERS:
        # Worker accounts may call it: only they (`only`), or they too, for the jobs they claimed (`too`).
        doc["x-svc-workers"] = "only" if op.workers == WORKERS_ONLY else "too"
    parameters = [
        {
            "name": p.name,
            "in": p.location,
            "required": p.required or p.location == "path",
            "schema": p.schema,
            **({"description": p.description} if p.description else {}),
            # An empty value of an optional query parameter reads as the parameter left out (api/params.py).
            **({"allowEmptyValue": True} if p.location == "query" and not p.required else {}),
        }
        for p in op.params
    ]
    if op.idempotent_key:
        parameters.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "minLength": 1, "maxLength": 200},
                "description": "Repeats with the same key return the first answer and record nothing new.",
            }
        )
    if op.if_match:
        parameters.append(
            {
                "name": "If-Match",
                "in": "header",
                "required": op.if_match_required,
                "schema": {"type": "string"},
                "description": conditional.IF_MATCH_REQUIRED_DESCRIPTION
                if op.if_match_required
                else conditional.IF_MATCH_DESCRIPTION,
            }
        )
    if parameters:
        doc["parameters"] = parameters
    if op.request is not None:
        schema = {"$ref": f"#/components/schemas/{component_name(op.request)}"}
        doc["requestBody"] = {
            "required": not op.request_optional,
            "content": {media: _request_media(media, schema) for media in op.request_media},
        }
    for status, schema in sorted(standard_responses(op).items()):
        media = "application/problem+json" if schema == "problem.json" else op.content_type
        entry: dict[str, Any] = {"description": op.response_notes.get(status) or _status_name(status)}
        if schema is not None:
            entry["content"] = {media: {"schema": {"$ref": f"#/components/schemas/{component_name(schema)}"}}}
        elif status < 300 and "json" not in media:
            entry["content"] = {media: {"schema": {"type": "string"}}}  # a page, or the metrics text
        if status == 403 and op.auth in {BASIC, CI_OR_BASIC}:
            entry["description"] = _forbidden_description(op, method)
        if status == 200 and (op.etag or op.if_match):
            entry["headers"] = {
                "ETag": {"required": True, "schema": {"type": "string"}, "description": conditional.ETAG_DESCRIPTION}
            }
        if status == 428 and op.if_match_required:
            entry["description"] = conditional.PRECONDITION_REQUIRED_DESCRIPTION
        if status == 412 and op.if_match:
            entry["description"] = conditional.PRECONDITION_DESCRIPTION
            entry["headers"] = {
                "ETag": {"required": True, "schema": {"type": "string"}, "description": "The current version's tag."}
            }
        if status == 401 and op.auth in {BASIC, CI_OR_BASIC}:
            entry["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}}}
        if status == 429 and op.auth != PUBLIC:
            entry["description"] = LOCKOUT_DESCRIPTION
            entry["headers"] = {
                "Retry-After": {
                    "required": True,
                    "description": "Seconds until this address may present credentials again.",
                    "schema": {"type": "integer", "minimum": 1},
                }
            }
        if status == 503 and schema == "problem.json":
            entry["description"] = (
                "The database cannot be reached or cannot take the write just now (problem type "
                "database-unavailable); nothing was recorded: retry after Retry-After, with the same Idempotency-Key"
            )
            entry["headers"] = {
                "Retry-After": {
                    "required": True,
                    "description": "Seconds to wait before trying again.",
                    "schema": {"type": "integer", "minimum": 1},
                }
            }
        doc["responses"][str(status)] = entry
    return doc


def _status_name(status: int) -> str:
    return falcon.code_to_http_status(status).split(" ", 1)[1]


def _request_media(media: str, schema: dict[str, Any]) -> dict[str, Any]:
    if media != FORM_PAYLOAD:
        return {"schema": schema}
    # GitHub's form-encoded delivery: the same JSON document, percent-encoded in a `payload` field.
    return {
        "schema": {
            "type": "object",
            "required": ["payload"],
            "properties": {
                "payload": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": schema,
                    "description": "The webhook's JSON document, as GitHub sends it when the webhook's content "
                    "type is application/x-www-form-urlencoded. The signature covers the form-encoded bytes.",
                }
            },
        },
        "encoding": {"payload": {"contentType": "application/json"}},
    }


def _forbidden_description(op: Operation, method: str) -> str:
    if op.workers == WORKERS_ONLY:
        return "Forbidden: only worker accounts call this (svc user add NAME --role worker), or a cross-site request"
    parts = []
    if op.workers == NO_WORKERS:
        parts.append("the credentials are a worker's account (a worker calls only the dispatch endpoints for workers)")
    else:
        parts.append("a worker's account asked for a job or ticket other than the ones it claimed")
    if changes_something(method, op):
        parts.append("a viewer's account (viewers read and change nothing)")
    if changes_something(method):
        parts.append(
            "the request came from another site"
            + ("" if changes_something(method, op) else " (a viewer may use it: it changes nothing)")
        )
    return "Forbidden: " + "; or ".join(parts)


def standard_responses(op: Operation) -> dict[int, str | None]:
    """The operation's own responses plus the problem answers its declaration implies."""
    implied: dict[int, str | None] = {}
    if op.auth != PUBLIC:
        # Every operation behind credentials reads or writes the database: an outage answers 503.
        implied.update({401: "problem.json", 429: "problem.json", 503: "problem.json"})
    if op.auth in {BASIC, CI_OR_BASIC}:
        # A worker's account outside its endpoints (or anyone else's on a worker's); a viewer's account changing
        # something, or a cross-site request riding on a browser's cached credentials.
        implied[403] = "problem.json"
    if op.request is not None or op.raw_body:
        implied.update({400: "problem.json", 413: "problem.json", 415: "problem.json", 422: "problem.json"})
    if op.if_match:
        implied[412] = "problem.json"
    if op.if_match_required:
        implied[428] = "problem.json"
    # Every operation refuses a query parameter it does not declare (a page says so on a page).
    implied[400] = None if op.content_type.startswith("text/html") else "problem.json"
    return {**implied, **op.responses}


def _operation_id(op: Operation, method: str, path: str) -> str:
    """`getTicketsKey` for `GET /api/v1/tickets/{key}`; the web board's pages say so (`getTicketsKeyPage`, and
    `getBoardPage` for `/`), since they share paths with the API's resources."""
    words = [w for w in re.split(r"[/{}_.-]+", path.removeprefix("/api/v1")) if w]
    if not path.startswith("/api/v1/") and op.content_type.startswith("text/html"):
        words = [*(words or ["board"]), "page"]
    return method.lower() + "".join(w.capitalize() for w in words)


def documented_operations(routes: list[tuple[str, object]]) -> dict[tuple[str, str], Operation]:
    """(path, method) -> Operation for every registered route that declares operations."""
    return {
        (path, method): op for path, resource in routes for method, op in getattr(resource, "operations", {}).items()
    }


def responder_methods(app: falcon.App) -> set[tuple[str, str]]:
    """(path, method) for every responder the app really serves (Falcon's own OPTIONS/405 excluded)."""
    return {
        (route.path, info.method)
        for route in falcon.inspect.inspect_routes(app)
        for info in route.methods
        if not info.internal
    }


def build(routes: list[tuple[str, object]], *, server_url: str | None = None) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    seen: dict[str, tuple[str, str]] = {}
    for (path, method), op in sorted(documented_operations(routes).items()):
        doc = _operation_doc(op, method, path)
        if doc["operationId"] in seen:  # OpenAPI requires them unique; code generators name methods by them
            raise ValueError(f"operationId {doc['operationId']} of {method} {path} is also {seen[doc['operationId']]}")
        seen[doc["operationId"]] = (method, path)
        paths.setdefault(path, {})[method.lower()] = doc
    document = {
        "openapi": "3.1.0",
        "info": {
            "title": "Delivery coordination service",
            "version": __version__,
            "description": "Board, writing agent, ops agents, the router (shadow mode until a rule has earned going "
            "live) and live dispatch to workers in bays. Errors are RFC 9457 problem details "
            "(application/problem+json). No string in a request body may hold U+0000 (the NUL "
            "character) or a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair): such a body is "
            "answered 400, since PostgreSQL text cannot store the one and no text can hold the other.",
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "paths": paths,
        "components": {
            # A copy: the components are made once per process and must not change under another document.
            "schemas": copy.deepcopy(_components()),
            "securitySchemes": {
                "basic": {
                    "type": "http",
                    "scheme": "basic",
                    "description": "A person's account (svc user add NAME --role viewer|operator|worker) or the "
                    "bootstrap operator SVC_BASIC_AUTH. A viewer may use every GET and nothing else (403); an operator "
                    "may use everything basic credentials open but the workers' own endpoints; a worker (a machine in "
                    "a bay) only those, and its own jobs and their tickets.",
                },
                "ciSecret": {"type": "apiKey", "in": "header", "name": "X-Svc-CI-Secret"},
                "forgeSignature": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Hub-Signature-256",
                    "description": "sha256=<hex HMAC-SHA256 of the raw body>, key SVC_GITHUB_WEBHOOK_SECRET",
                },
                "gitlabToken": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Gitlab-Token",
                    "description": "equal to SVC_GITLAB_WEBHOOK_TOKEN (GitLab's own token, never GitHub's key)",
                },
                "trackerSignature": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Linear-Signature",
                    "description": "hex HMAC-SHA256 of the raw body",
                },
            },
        },
    }
    if server_url:
        document["servers"] = [{"url": server_url}]
    return document
