"""A Falcon test client that also holds every answer to the app's own OpenAPI document.

Each response with a documented schema for its route and status is validated against it, so a test that
exercises an endpoint also proves the document tells the truth about it.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import falcon.testing
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import contracts


class UndocumentedResponse(AssertionError):
    pass


class _ReadDocument:
    """An OpenAPI document as the client checks answers against it: its routes as patterns, and a validator per
    response schema. Every test's app serves the same document, so one reading serves all of them; the client
    still fetches the document from its own app, and a different text is read anew."""

    def __init__(self, document: dict[str, Any]):
        self.document = document
        self.routes = [
            (re.compile("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(template)) + "$"), template)
            for template in document["paths"]
        ]
        resource = Resource.from_contents(document, default_specification=DRAFT202012)
        self.registry = Registry().with_resource("urn:svc:openapi", resource)
        self._validators: dict[str, Draft202012Validator] = {}

    def validator(self, schema: dict) -> Draft202012Validator:
        key = schema["$ref"] if "$ref" in schema else repr(schema)
        if key not in self._validators:
            wrapper = {"$ref": "urn:svc:openapi" + schema["$ref"]} if "$ref" in schema else schema
            self._validators[key] = Draft202012Validator(
                wrapper, registry=self.registry, format_checker=contracts.format_checker()
            )
        return self._validators[key]


_READ: dict[str, _ReadDocument] = {}


class ApiClient:
    def __init__(self, app, *, basic: str, ci_secret: str, check_document: bool = True):
        self.client = falcon.testing.TestClient(app)
        self.basic_header = {"Authorization": "Basic " + base64.b64encode(basic.encode()).decode()}
        self.ci_header = {"X-Svc-CI-Secret": ci_secret}
        self.check_document = check_document
        self._document = None
        self._read: _ReadDocument | None = None
        self._routes: list[tuple[re.Pattern, str]] = []

    # -- credentials ------------------------------------------------------------------------------------

    def request(self, method: str, path: str, *, auth: str | None = "basic", headers=None, **kwargs):
        all_headers = {}
        if auth == "basic":
            all_headers.update(self.basic_header)
        elif auth == "ci":
            all_headers.update(self.ci_header)
        all_headers.update(headers or {})
        result = self.client.simulate_request(method, path, headers=all_headers, **kwargs)
        if self.check_document:
            self._check(method, path, result)
        return result

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def patch(self, path, **kw):
        return self.request("PATCH", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    # -- the document -------------------------------------------------------------------------------------

    @property
    def document(self) -> dict[str, Any]:
        if self._document is None:
            text = self.client.simulate_get("/api/v1/openapi.json").text
            if text not in _READ:
                _READ[text] = _ReadDocument(json.loads(text))
            self._read = _READ[text]
            self._document, self._routes = self._read.document, self._read.routes
        return self._document

    def _check(self, method: str, path: str, result) -> None:
        document = self.document
        template = next((t for pattern, t in self._routes if pattern.match(path.split("?")[0])), None)
        if template is None:
            if result.status_code != 404 and result.status_code != 405:
                raise UndocumentedResponse(f"{method} {path} answered {result.status_code} but is not documented")
            self._check_problem(result)
            return
        operation = document["paths"][template].get(method.lower())
        if operation is None:
            if result.status_code != 405:
                raise UndocumentedResponse(f"{method} {template} is not documented")
            self._check_problem(result)
            return
        status = str(result.status_code)
        response = operation["responses"].get(status)
        if response is None:
            raise UndocumentedResponse(
                f"{method} {template} answered {status}, not among its documented statuses "
                f"{sorted(operation['responses'])}: {result.text[:300]}"
            )
        for media, content in response.get("content", {}).items():
            given = result.headers.get("content-type", "").split(";")[0]
            if given != media:
                raise UndocumentedResponse(f"{method} {template} {status}: got {given!r}, documented {media!r}")
            if "json" in media:
                self._validate(content["schema"], result.json, f"{method} {template} {status}")

    def _check_problem(self, result) -> None:
        assert result.headers.get("content-type") == "application/problem+json", result.headers
        contracts.check("problem.json", result.json)

    def _validate(self, schema: dict, instance: Any, where: str) -> None:
        validator = self._read.validator(schema)
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
        if errors:
            detail = "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])
            raise UndocumentedResponse(f"{where}: response does not match the document: {detail}")
