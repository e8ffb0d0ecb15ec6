"""`GET/PUT /api/v1/router/dispatch`: the switch over all live dispatch (`domain/dispatch/switch.py`). Everyone
reads it; an operator pauses it with a reason and resumes it; a viewer, a pause without a reason, or anything
else the contract refuses is a problem+json that changes nothing."""

from __future__ import annotations

import pytest

from conftest import BASIC, CI_SECRET, PASSWORDS
from testclient import ApiClient

VERA = ("vera", "vera-password-1")  # a viewer
NEVER = {"paused": False, "reason": None, "changed_by": None, "changed_at": None}


@pytest.fixture
def api(app):
    from domain import accounts

    accounts.add(VERA[0], "viewer", VERA[1], passwords=PASSWORDS)
    return ApiClient(app, basic=BASIC, ci_secret=CI_SECRET)


def viewer(api: ApiClient) -> ApiClient:
    return ApiClient(api.client.app, basic=":".join(VERA), ci_secret=CI_SECRET)


def test_never_set_it_is_not_paused(api):
    seen = api.get("/api/v1/router/dispatch")
    assert seen.status_code == 200
    assert seen.json == NEVER
    assert viewer(api).get("/api/v1/router/dispatch").json == NEVER


def test_an_operator_pauses_with_a_reason_and_resumes(api, clock):
    paused = api.put("/api/v1/router/dispatch", json={"paused": True, "reason": "the forge is down"})
    assert paused.status_code == 200, paused.text
    at = clock().strftime("%Y-%m-%dT%H:%M:%S")
    assert paused.json["changed_at"].startswith(at) and paused.json["changed_at"].endswith("Z")
    expected = {
        "paused": True,
        "reason": "the forge is down",
        "changed_by": "admin",
        "changed_at": paused.json["changed_at"],
    }
    assert paused.json == expected
    assert api.get("/api/v1/router/dispatch").json == expected
    clock.advance(minutes=10)
    resumed = api.put("/api/v1/router/dispatch", json={"paused": False})
    assert resumed.status_code == 200
    assert (resumed.json["paused"], resumed.json["reason"], resumed.json["changed_by"]) == (False, None, "admin")
    assert resumed.json["changed_at"] != paused.json["changed_at"]
    again = api.put("/api/v1/router/dispatch", json={"paused": False, "reason": "forge back"})
    assert (again.json["paused"], again.json["reason"]) == (False, "forge back")


def test_a_viewer_may_not_pause(api):
    refused = viewer(api).put("/api/v1/router/dispatch", json={"paused": True, "reason": "curious"})
    assert refused.status_code == 403
    assert refused.headers["Content-Type"].startswith("application/problem+json")
    assert api.get("/api/v1/router/dispatch").json == NEVER


@pytest.mark.parametrize(
    "body",
    [
        {"paused": True},
        {"paused": True, "reason": ""},
        {"paused": True, "reason": "   "},
        {"paused": "yes", "reason": "x"},
        {"reason": "no paused"},
        {"paused": True, "reason": "x", "until": "tomorrow"},
    ],
)
def test_a_pause_without_a_reason_or_a_bad_body_is_422_and_changes_nothing(api, body):
    refused = api.put("/api/v1/router/dispatch", json=body)
    assert refused.status_code == 422, refused.text
    assert refused.headers["Content-Type"].startswith("application/problem+json")
    assert refused.json["type"].endswith("/validation") and refused.json["errors"]
    assert api.get("/api/v1/router/dispatch").json == NEVER


def test_no_credentials_no_switch(api):
    assert api.get("/api/v1/router/dispatch", auth=None).status_code == 401
    assert api.put("/api/v1/router/dispatch", json={"paused": True, "reason": "x"}, auth=None).status_code == 401
    assert api.get("/api/v1/router/dispatch").json == NEVER
