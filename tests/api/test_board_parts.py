"""Initiatives, slots and the wallet through HTTP."""

import pytest


@pytest.fixture
def ticket(api):
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port"})
    api.post("/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "port", "title": "One", "stage": "queued"})
    api.post("/api/v1/tickets", json={"key": "PORT-2", "initiative_id": "port", "title": "Two", "stage": "queued"})
    return "PORT-1"


def test_initiatives_create_list_and_patch(api):
    created = api.post("/api/v1/initiatives", json={"name": "Writing routine"})
    assert created.status_code == 201
    assert created.json == {**created.json, "id": "writing-routine", "stage": "agree"}
    assert api.post("/api/v1/initiatives", json={"id": "writing-routine", "name": "x"}).status_code == 409
    patched = api.patch("/api/v1/initiatives/writing-routine", json={"stage": "active"})
    assert patched.json["stage"] == "active"
    assert api.patch("/api/v1/initiatives/nope", json={"stage": "active"}).status_code == 404
    assert api.patch("/api/v1/initiatives/writing-routine", json={"stage": "later"}).status_code == 422
    listed = api.get("/api/v1/initiatives").json
    assert [i["id"] for i in listed["initiatives"]] == ["writing-routine"] and listed["next"] is None


def test_claim_a_slot_sets_the_ticket_and_creates_the_slot(api, ticket):
    result = api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-1"})
    assert result.status_code == 200
    assert result.json["name"] == "bay-1" and result.json["ticket"] == "PORT-1"
    assert api.get("/api/v1/tickets/PORT-1").json["assigned_slot"] == "bay-1"
    assert api.get("/api/v1/slots").json["slots"][0]["ticket"] == "PORT-1"
    kinds = [e["kind"] for e in api.get("/api/v1/tickets/PORT-1/timeline").json["entries"]]
    assert kinds == ["slot_claimed", "created"]


def test_claiming_again_for_the_same_ticket_is_harmless(api, ticket):
    api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-1"})
    again = api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-1"})
    assert again.status_code == 200
    assert len(api.get("/api/v1/tickets/PORT-1/timeline").json["entries"]) == 2


def test_a_slot_held_by_another_ticket_is_409(api, ticket):
    api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-1"})
    refused = api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-2"})
    assert refused.status_code == 409
    assert "PORT-1" in refused.json["detail"]
    assert api.get("/api/v1/tickets/PORT-2").json["assigned_slot"] is None


def test_free_slots_are_listed(api, ticket):
    api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-1"})
    api.post("/api/v1/tickets/PORT-1/cancel")
    slots = api.get("/api/v1/slots").json["slots"]
    assert [s["name"] for s in slots] == ["bay-1"]


def test_claim_for_an_unknown_ticket_is_404(api, ticket):
    assert api.post("/api/v1/slots/bay-1/claim", json={"ticket": "NOPE-9"}).status_code == 404
    assert api.get("/api/v1/slots").json["slots"] == []


def test_claim_for_a_finished_ticket_is_409(api, ticket):
    api.post("/api/v1/tickets/PORT-1/mark_done")
    assert api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-1"}).status_code == 409


def test_wallet_defaults_and_put(api):
    assert api.get("/api/v1/wallet").json["percent_used"] == 0.0
    result = api.put("/api/v1/wallet", json={"budget": 200, "spent": 50, "locked": False})
    assert result.json == {**result.json, "budget": 200.0, "spent": 50.0, "percent_used": 25.0, "locked": False}
    assert api.put("/api/v1/wallet", json={"budget": 200}).status_code == 422
    assert api.get("/api/v1/wallet").json["budget"] == 200.0


def test_a_tiny_budget_gives_a_finite_percentage(api):
    # Found by the schemathesis run: 5 spent of a 1e-308 budget made percent_used infinite, sent as the
    # bare word Infinity, which is not JSON.
    result = api.put("/api/v1/wallet", json={"budget": 1.1125369292536007e-308, "spent": 5.0, "locked": False})
    assert result.status_code == 200
    assert result.json["percent_used"] == 1_000_000.0
    assert "Infinity" not in result.text
