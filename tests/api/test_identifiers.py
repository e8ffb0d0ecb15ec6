"""No identifier the API takes may hold a control character (a trailing line break included): ticket keys,
initiative ids, bays, account and rule names, in a body (422, its JSON pointer), a path or a query (400, naming the
parameter); and nothing is recorded. `force` must say something. A worker reads its job's ticket without the
timeline."""

from __future__ import annotations

import pytest
from dispatch_kit import board, claim, policy, queue_job, set_policy, worker

from router_kit import allowlisted

pytestmark = pytest.mark.both_backends


@pytest.fixture
def api(app_factory, config_factory):
    return allowlisted(app_factory, config_factory)


@pytest.mark.parametrize("control", ["\n", "\r", "\t", "\x00", "\x1b", "\x7f", "\x85"])
def test_an_identifier_with_a_control_character_in_a_body_is_422_with_its_pointer(api, control):
    board(api, "PORT-7")
    bay = worker(api)
    cases = [
        (api, "POST", "/api/v1/tickets", {"key": f"NL-1{control}", "initiative_id": "port", "title": "x"}, "/key"),
        (
            api,
            "POST",
            "/api/v1/tickets",
            {"key": "NL-1", "initiative_id": f"nl{control}", "title": "x"},
            "/initiative_id",
        ),
        (api, "POST", "/api/v1/initiatives", {"id": f"nl{control}", "name": "NL"}, "/id"),
        (api, "POST", "/api/v1/slots/bay-3/claim", {"ticket": f"PORT-7{control}"}, "/ticket"),
        (bay, "POST", "/api/v1/dispatch/claim", {"bay": f"bay-1{control}"}, "/bay"),
    ]
    for client, method, path, body, pointer in cases:
        answer = client.request(method, path, json=body)
        if control == "\x00":
            assert answer.status_code == 400, (path, answer.text)  # refused as the body is read: no text holds NUL
        else:
            assert answer.status_code == 422, (path, answer.text)
        assert pointer in [e["path"] for e in answer.json["errors"]], (path, answer.text)
    assert [t["key"] for t in api.get("/api/v1/tickets").json["tickets"]] == ["PORT-7"]
    assert "nl" not in str(api.get("/api/v1/initiatives").json)
    assert api.get("/api/v1/slots").json["slots"] == []


def test_a_rule_name_with_a_line_break_is_422_naming_it(api):
    document = policy()
    document["rules"][0]["name"] += "\n"
    tag = api.get("/api/v1/router/policy").headers["ETag"]
    refused = api.put("/api/v1/router/policy", json={"policy": document, "reason": "r"}, headers={"If-Match": tag})
    assert refused.status_code == 422 and "/policy/rules/0/name" in [e["path"] for e in refused.json["errors"]]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/tickets/PORT-7%0A"),
        ("GET", "/api/v1/tickets/PORT-7%0A/timeline"),
        ("POST", "/api/v1/tickets/PORT-7%0D/mark_done"),
        ("PATCH", "/api/v1/initiatives/port%0A"),
        ("POST", "/api/v1/slots/bay-1%0A/claim"),
        ("GET", "/api/v1/tickets?initiative_id=port%0A"),
        ("GET", "/api/v1/dispatch/jobs?ticket=PORT-7%0A"),
        ("GET", "/api/v1/router/decisions?subject_id=PORT-7%0A"),
    ],
)
def test_an_identifier_with_a_control_character_in_a_path_or_a_query_is_400_naming_it(api, method, path):
    board(api, "PORT-7")
    body = {"ticket": "PORT-7"} if "claim" in path else {"stage": "active"} if method == "PATCH" else None
    answer = api.request(method, path, json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json["errors"][0]["path"] in ("key", "id", "name", "initiative_id", "ticket", "subject_id")
    assert api.get("/api/v1/slots").json["slots"] == []
    assert api.get("/api/v1/tickets/PORT-7").json["stage"] == "queued"


@pytest.mark.parametrize("force", ["", " ", "   \t\n", "\u00a0"])
def test_force_must_say_something(api, force):
    tag = api.get("/api/v1/router/policy").headers["ETag"]
    refused = api.put(
        "/api/v1/router/policy",
        json={"policy": policy(), "reason": "go live", "force": force},
        headers={"If-Match": tag},
    )
    assert refused.status_code == 422 and {e["path"] for e in refused.json["errors"]} == {"/force"}
    assert len(api.get("/api/v1/router/policy/history").json["versions"]) == 1


def test_a_worker_reads_its_job_s_ticket_without_the_timeline_and_people_with_it(api):
    board(api, "PORT-7")
    set_policy(api, policy())
    queue_job(api, "PORT-7")
    bay = worker(api)
    assert claim(bay).status_code == 200
    read = bay.get("/api/v1/tickets/PORT-7")
    assert read.status_code == 200 and "timeline" not in read.json and read.json["key"] == "PORT-7"
    assert len(api.get("/api/v1/tickets/PORT-7").json["timeline"]) >= 2
