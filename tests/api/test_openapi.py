"""The OpenAPI document tells the truth about the app's routes."""

import base64
import json

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import OpenAPIV31SpecValidator

from api import openapi_document as openapi

from conftest import BASIC, CI_SECRET
from events_kit import EXAMPLES
from testclient import ApiClient


def test_every_responder_is_documented_and_every_documented_operation_exists(app, api):
    document = api.get("/api/v1/openapi.json", auth=None).json
    documented = {(path, method.upper()) for path, ops in document["paths"].items() for method in ops}
    assert documented == openapi.responder_methods(app)


def test_the_document_is_openapi_3_1_with_resolvable_schemas(api):
    document = api.get("/api/v1/openapi.json", auth=None).json
    assert document["openapi"] == "3.1.0"
    schemas = document["components"]["schemas"]
    for schema in schemas.values():
        Draft202012Validator.check_schema(schema)
    text = str(document)
    for ref in __import__("re").findall(r"'\$ref': '#/components/schemas/([^']+)'", text):
        assert ref in schemas, ref


def test_every_operation_documents_its_credentials_and_errors(api):
    document = api.get("/api/v1/openapi.json", auth=None).json
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            if op["security"]:
                assert "401" in op["responses"], (method, path)
            if "requestBody" in op:
                assert "422" in op["responses"], (method, path)


def test_an_empty_query_parameter_reads_as_absent_and_the_document_says_so(api):
    # Found by the schemathesis run: `?agent_id=` and `?since=` were answered as if absent while the document
    # promised only the enum or a date-time; `?limit=` alone was a 400. One rule now, and the document states it.
    document = api.get("/api/v1/openapi.json", auth=None).json
    optional_query = [
        (path, p["name"], p.get("allowEmptyValue"))
        for path, ops in document["paths"].items()
        for op in ops.values()
        for p in op.get("parameters", [])
        if p["in"] == "query" and not p["required"]
    ]
    assert optional_query and all(allowed is True for _, _, allowed in optional_query), optional_query
    everything = api.get("/api/v1/agents/runs", auth="ci").json
    assert api.get("/api/v1/agents/runs?agent_id=&limit=&cursor=", auth="ci").json == everything
    assert api.get("/api/v1/router/decisions?since=&outcome=&limit=").status_code == 200
    assert api.get("/api/v1/tickets?limit=").status_code == 200
    assert api.get("/api/v1/tickets?limit=0").status_code == 400


def test_the_whole_document_is_valid_openapi_3_1(api):
    # openapi-spec-validator reads it as an independent OpenAPI 3.1 reader: unique operationIds, resolvable
    # references, schemas under the document's JSON Schema dialect, parameters and responses in their places.
    document = api.get("/api/v1/openapi.json", auth=None).json
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in OpenAPIV31SpecValidator(document).iter_errors()]
    assert errors == []


def test_the_web_pages_and_the_api_have_operation_ids_of_their_own(api):
    document = api.get("/api/v1/openapi.json", auth=None).json
    ids = {(path, method): op["operationId"] for path, ops in document["paths"].items() for method, op in ops.items()}
    assert ids[("/api/v1/tickets/{key}", "get")] == "getTicketsKey"
    assert ids[("/tickets/{key}", "get")] == "getTicketsKeyPage"
    assert ids[("/", "get")] == "getBoardPage"
    assert len(set(ids.values())) == len(ids)


def test_every_operation_that_takes_credentials_documents_the_lockout_and_the_server_keeps_to_it(app_factory, config):
    from api.auth import FailedCredentials

    api = ApiClient(app_factory(config, failures=FailedCredentials(limit=2)), basic=BASIC, ci_secret=CI_SECRET)
    document = api.get("/api/v1/openapi.json", auth=None).json
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            if not op["security"]:
                assert "429" not in op["responses"], (method, path)
                continue
            lockout = op["responses"]["429"]
            assert "failed credentials" in lockout["description"], (method, path)
            assert lockout["headers"]["Retry-After"]["required"] is True, (method, path)
            assert lockout["content"]["application/problem+json"]["schema"] == {"$ref": "#/components/schemas/problem"}
    wrong = {"Authorization": "Basic " + base64.b64encode(b"admin:guess").decode()}
    for _ in range(2):
        assert api.get("/api/v1/tickets", auth=None, headers=wrong).status_code == 401
    # Locked out, the right credentials included; the client checks the answer against the document.
    locked = api.get("/api/v1/tickets")
    assert locked.status_code == 429 and int(locked.headers["Retry-After"]) >= 1
    assert locked.json["status"] == 429


def _events_bodies() -> list[tuple[str, object]]:
    envelopes = sorted((EXAMPLES / "envelopes").glob("*/*.json"))
    assert len(envelopes) > 20
    bodies: list[tuple[str, object]] = [
        (p.relative_to(EXAMPLES).as_posix(), json.loads(p.read_text())) for p in envelopes
    ]
    valid = json.loads((EXAMPLES / "envelopes/valid/opened.json").read_text())
    invalid = json.loads((EXAMPLES / "envelopes/invalid/unknown-source.json").read_text())
    return [
        *bodies,
        ("a batch of one", {"events": [valid]}),
        ("a batch with a broken envelope (judged item by item)", {"events": [invalid, 5, "x"]}),
        ("an empty batch", {"events": []}),
        ("a batch of 501", {"events": [valid] * 501}),
        ("a batch with another member", {"events": [valid], "note": "x"}),
        ("an envelope with an events member", {**valid, "events": [valid]}),
        ("an empty object", {}),
        ("an array", [valid]),
        ("a string", "opened"),
    ]


@pytest.mark.parametrize("name, body", _events_bodies(), ids=[name for name, _ in _events_bodies()])
def test_post_events_is_refused_exactly_when_the_document_says_the_body_is_wrong(api, name, body):
    # Found by schemathesis: the document allowed any object while the router refuses all but a conforming
    # envelope. The document's request schema (read from the document itself) and the server now agree.
    document = api.get("/api/v1/openapi.json", auth=None).json
    request_schema = document["paths"]["/api/v1/events"]["post"]["requestBody"]["content"]["application/json"]
    validator = Draft202012Validator({**request_schema["schema"], "components": document["components"]})
    documented_valid = validator.is_valid(body)
    answer = api.post("/api/v1/events", json=body, auth="ci")
    assert (answer.status_code in (200, 202)) == documented_valid, (answer.status_code, answer.json)
    if not documented_valid:
        assert answer.status_code == 422


def test_the_forge_webhook_documents_githubs_form_encoded_body(api):
    document = api.get("/api/v1/openapi.json", auth=None).json
    content = document["paths"]["/api/v1/webhooks/forge"]["post"]["requestBody"]["content"]
    assert set(content) == {"application/json", "application/x-www-form-urlencoded"}
    form = content["application/x-www-form-urlencoded"]
    assert form["schema"]["required"] == ["payload"]
    assert form["schema"]["properties"]["payload"]["contentMediaType"] == "application/json"
    # The tracker and CI endpoints take JSON only.
    for path in ("/api/v1/webhooks/tracker", "/api/v1/webhooks/ci"):
        assert set(document["paths"][path]["post"]["requestBody"]["content"]) == {"application/json"}


def test_the_tracker_webhook_documents_the_401_for_a_stale_delivery(api):
    document = api.get("/api/v1/openapi.json", auth=None).json
    unauthorized = document["paths"]["/api/v1/webhooks/tracker"]["post"]["responses"]["401"]
    assert "stale delivery" in unauthorized["description"]
    assert "SVC_WEBHOOK_TOLERANCE_SECONDS" in unauthorized["description"]
    assert unauthorized["content"]["application/problem+json"]["schema"] == {"$ref": "#/components/schemas/problem"}
