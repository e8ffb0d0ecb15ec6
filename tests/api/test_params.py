"""Query parameters (`api/params.py`): a parameter an operation does not declare is refused, naming the nearest one it
takes; the check comes from each operation's own declaration, the one the OpenAPI document shows."""

import html
import re

import pytest
from dispatch_kit import worker

from conftest import BASIC, CI_SECRET
from events_kit import GITHUB_SECRET, TRACKER_SECRET, github_headers, linear_body, linear_headers, raw_example
from testclient import ApiClient


def test_a_misspelled_filter_is_refused_naming_the_one_meant(api):
    # It answered every subject's decisions with 200, the first of them PORT-12's, so it looked right.
    result = api.get("/api/v1/router/decisions?subject=PORT-12")
    assert result.status_code == 400
    assert result.headers["content-type"] == "application/problem+json"
    assert result.json["detail"] == "unknown query parameter 'subject'; did you mean 'subject_id'?"
    assert result.json["errors"] == [
        {"path": "subject", "message": "unknown query parameter; did you mean 'subject_id'?"}
    ]
    assert result.json["type"].endswith("/bad-query")
    stag = api.get("/api/v1/tickets?stag=execute&limit=5")
    assert (stag.status_code, stag.json["detail"]) == (400, "unknown query parameter 'stag'; did you mean 'stage'?")


def test_a_parameter_unlike_any_is_told_what_the_operation_takes_or_that_it_takes_none(api):
    tickets = api.get("/api/v1/tickets?zzz=1")
    assert tickets.json["detail"] == (
        "unknown query parameter 'zzz'; this takes cursor, initiative_id, limit, needs_you, stage"
    )
    wallet = api.get("/api/v1/wallet?zzz=1")
    assert (wallet.status_code, wallet.json["detail"]) == (
        400,
        "unknown query parameter 'zzz'; this takes no query parameters",
    )
    several = api.get("/api/v1/tickets?stag=x&zzz=1&limit=2")
    assert several.json["detail"] == (
        "unknown query parameters 'stag' (did you mean 'stage'?); "
        "'zzz' (this takes cursor, initiative_id, limit, needs_you, stage)"
    )
    assert [e["path"] for e in several.json["errors"]] == ["stag", "zzz"]


def test_a_refused_change_records_nothing(api):
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port"})
    body = {"key": "PORT-1", "initiative_id": "port", "title": "x"}
    refused = api.post("/api/v1/tickets?dry_run=1", json=body)
    assert refused.status_code == 400 and "'dry_run'" in refused.json["detail"]
    assert api.get("/api/v1/tickets").json["tickets"] == []
    assert api.post("/api/v1/tickets", json=body).status_code == 201


def _path(template: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", template)


def test_every_operation_refuses_a_parameter_it_does_not_declare(app_factory, config_factory, clock):
    """From the declaration, so a new resource gets it for free: every operation of the document, each with its
    own credentials, refuses one more parameter than it declares."""
    config = config_factory(github_webhook_secret=GITHUB_SECRET, tracker_webhook_secret=TRACKER_SECRET)
    api = ApiClient(app_factory(config, clock=clock), basic=BASIC, ci_secret=CI_SECRET)
    document = api.get("/api/v1/openapi.json", auth=None).json
    machine = worker(api)  # the workers' own endpoints take a worker's credentials (anyone else: 403)
    signed = {
        "/api/v1/webhooks/forge": (raw_example("payloads/github/ping.json"), "github"),
        "/api/v1/webhooks/tracker": (linear_body("payloads/linear/issue.update-title.json", at=clock.now), "linear"),
    }
    checked = 0
    for template, operations in document["paths"].items():
        for method, operation in operations.items():
            declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
            headers, body, auth = {}, None, "basic"
            schemes = {name for requirement in operation["security"] for name in requirement}
            if not schemes:
                auth = None
            elif schemes == {"ciSecret"}:
                auth = "ci"
            if template in signed:
                body, sender = signed[template]
                headers = github_headers("ping", "p1", body) if sender == "github" else linear_headers("l1", body)
                auth = None
            client = machine if operation.get("x-svc-workers") == "only" else api
            result = client.request(
                method.upper(), f"{_path(template)}?zz_not_declared=1", auth=auth, headers=headers, body=body
            )
            assert result.status_code == 400, (method, template, result.status_code, result.text[:200])
            assert "'zz_not_declared'" in html.unescape(result.text), (method, template)
            assert "zz_not_declared" not in declared
            checked += 1
    assert checked >= 40


@pytest.mark.parametrize("query", ["", "?limit=2", "?limit=", "?cursor=&limit=3"])
def test_declared_parameters_pass_as_before(api, query):
    assert api.get("/api/v1/tickets" + query).status_code == 200
