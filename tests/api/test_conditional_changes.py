"""Changes made from what someone saw: every changeable resource answers with a strong `ETag`, every change of
it honours `If-Match`, and a change made from an older version is a 412 that names the current state and who
changed it last, and changes nothing. Without `If-Match` a change works as before."""

from __future__ import annotations

import pytest

from domain.clock import iso

from conftest import CI_SECRET, PASSWORDS
from testclient import ApiClient

pytestmark = pytest.mark.both_backends

ADA = ("ada", "ada-password-1")


@pytest.fixture
def two(app, api):
    """Two people on one board: the bootstrap operator (`api`) and ada; initiative `port`, ticket PORT-14 queued."""
    from domain import accounts

    accounts.add(ADA[0], "operator", ADA[1], passwords=PASSWORDS)
    ada = ApiClient(app, basic=":".join(ADA), ci_secret=CI_SECRET)
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port", "stage": "active"})
    made = api.post(
        "/api/v1/tickets", json={"key": "PORT-14", "initiative_id": "port", "title": "x", "stage": "queued"}
    )
    assert made.status_code == 201
    return api, ada


def timeline_length(api, key="PORT-14"):
    return len(api.get(f"/api/v1/tickets/{key}/timeline").json["entries"])


def test_a_stale_move_is_412_naming_the_current_stage_and_who_moved_it(two, clock):
    me, ada = two
    seen = me.get("/api/v1/tickets/PORT-14")
    tag = seen.headers["ETag"]
    assert tag.startswith('"') and not tag.startswith("W/")

    clock.advance(minutes=2)
    moved = ada.post("/api/v1/tickets/PORT-14/move", json={"to": "blocked"}, headers={"If-Match": tag})
    assert moved.status_code == 200
    assert moved.headers["ETag"] != tag
    before = timeline_length(me)

    stale = me.post("/api/v1/tickets/PORT-14/move", json={"to": "execute"}, headers={"If-Match": tag})
    assert stale.status_code == 412
    assert stale.headers["content-type"] == "application/problem+json"
    problem = stale.json
    assert problem["current_stage"] == "blocked"
    assert problem["current"] == {"stage": "blocked", "waiting_on": None}
    assert problem["changed_by"] == "ada"
    assert problem["changed_at"] == iso(clock.now)  # when ada moved it
    assert problem["last_change"] == "PORT-14 was moved to blocked by ada"
    assert problem["etag"] == moved.headers["ETag"] == stale.headers["ETag"]
    assert "PORT-14 was moved to blocked by ada" in problem["detail"]
    # Nothing changed: the block stands, no timeline entry was written.
    assert me.get("/api/v1/tickets/PORT-14").json["stage"] == "blocked"
    assert timeline_length(me) == before

    # Read again, decide again: the current tag goes through.
    again = me.post("/api/v1/tickets/PORT-14/move", json={"to": "queued"}, headers={"If-Match": stale.headers["ETag"]})
    assert again.status_code == 200 and again.json["stage"] == "queued"


@pytest.mark.parametrize("action", ["mark_done", "cancel"])
def test_a_stale_finish_is_412_and_leaves_the_ticket_live(two, action):
    me, ada = two
    tag = me.get("/api/v1/tickets/PORT-14").headers["ETag"]
    ada.post("/api/v1/tickets/PORT-14/move", json={"to": "execute"})
    refused = me.post(f"/api/v1/tickets/PORT-14/{action}", headers={"If-Match": tag})
    assert refused.status_code == 412
    assert refused.json["last_change"] == "PORT-14 was moved to execute by ada"
    assert me.get("/api/v1/tickets/PORT-14").json["stage"] == "execute"


def test_without_if_match_a_change_works_as_before(two):
    me, ada = two
    ada.post("/api/v1/tickets/PORT-14/move", json={"to": "blocked"})
    assert me.post("/api/v1/tickets/PORT-14/move", json={"to": "execute"}).status_code == 200


def test_star_matches_any_version_and_a_weak_or_unknown_tag_none(two):
    me, _ = two
    tag = me.get("/api/v1/tickets/PORT-14").headers["ETag"]
    assert (
        me.post("/api/v1/tickets/PORT-14/move", json={"to": "execute"}, headers={"If-Match": "W/" + tag}).status_code
        == 412
    )
    assert (
        me.post("/api/v1/tickets/PORT-14/move", json={"to": "execute"}, headers={"If-Match": '"nope"'}).status_code
        == 412
    )
    listed = me.post("/api/v1/tickets/PORT-14/move", json={"to": "execute"}, headers={"If-Match": f'"nope", {tag}'})
    assert listed.status_code == 200
    assert me.post("/api/v1/tickets/PORT-14/move", json={"to": "ci"}, headers={"If-Match": "*"}).status_code == 200


def test_an_unknown_ticket_stays_404_with_if_match(two):
    me, _ = two
    assert (
        me.post("/api/v1/tickets/PORT-99/move", json={"to": "execute"}, headers={"If-Match": '"v1"'}).status_code == 404
    )


def test_a_move_the_machine_forbids_from_the_current_stage_stays_409_with_the_current_tag(two):
    me, _ = two
    tag = me.get("/api/v1/tickets/PORT-14").headers["ETag"]
    assert me.post("/api/v1/tickets/PORT-14/move", json={"to": "ship"}, headers={"If-Match": tag}).status_code == 409


def test_a_stale_initiative_change_is_412(two, clock):
    me, ada = two
    seen = me.get("/api/v1/initiatives/port")
    assert seen.status_code == 200 and seen.json["stage"] == "active"
    tag = seen.headers["ETag"]
    clock.advance(minutes=1)
    assert (
        ada.patch("/api/v1/initiatives/port", json={"stage": "cancelled"}, headers={"If-Match": tag}).status_code == 200
    )
    stale = me.patch("/api/v1/initiatives/port", json={"stage": "done"}, headers={"If-Match": tag})
    assert stale.status_code == 412
    assert stale.json["current"] == {"stage": "cancelled", "name": "Port"}
    assert stale.json["changed_by"] == "ada"
    assert stale.json["last_change"] == "initiative port was set to cancelled by ada"
    assert me.get("/api/v1/initiatives/port").json["stage"] == "cancelled"
    fresh = me.patch("/api/v1/initiatives/port", json={"stage": "done"}, headers={"If-Match": stale.headers["ETag"]})
    assert fresh.status_code == 200 and fresh.headers["ETag"] == me.get("/api/v1/initiatives/port").headers["ETag"]
    assert me.get("/api/v1/initiatives/nope").status_code == 404


def test_a_stale_wallet_is_412_and_keeps_the_colleagues_budget(two, clock):
    me, ada = two
    tag = me.get("/api/v1/wallet").headers["ETag"]
    clock.advance(seconds=5)
    assert (
        ada.put(
            "/api/v1/wallet", json={"budget": 500, "spent": 20, "locked": False}, headers={"If-Match": tag}
        ).status_code
        == 200
    )
    stale = me.put("/api/v1/wallet", json={"budget": 100, "spent": 20, "locked": True}, headers={"If-Match": tag})
    assert stale.status_code == 412
    assert stale.json["current"] == {"budget": 500.0, "spent": 20.0, "locked": False}
    assert stale.json["changed_by"] == "ada"
    assert me.get("/api/v1/wallet").json["budget"] == 500.0


def test_a_stale_automation_toggle_is_412_and_writes_no_audit_entry(two, clock):
    me, ada = two
    seen = me.get("/api/v1/agents/writing/automation")
    tag = seen.headers["ETag"]
    clock.advance(seconds=5)
    off = ada.post("/api/v1/agents/writing/automation", json={"enabled": False}, headers={"If-Match": tag})
    assert off.status_code == 200 and off.headers["ETag"] == me.get("/api/v1/agents/writing/automation").headers["ETag"]
    entries = timeline_length(me, "WRITING-DAILY")
    stale = me.post("/api/v1/agents/writing/automation", json={"enabled": True}, headers={"If-Match": tag})
    assert stale.status_code == 412
    assert stale.json["current"] == {"enabled": False}
    assert stale.json["last_change"] == "writing automation was turned off by ada"
    assert me.get("/api/v1/agents/writing/automation").json["enabled"] is False
    assert timeline_length(me, "WRITING-DAILY") == entries


def test_the_document_describes_the_tags_and_the_412(api):
    paths = api.document["paths"]
    for path, method in [
        ("/api/v1/tickets/{key}/move", "post"),
        ("/api/v1/tickets/{key}/mark_done", "post"),
        ("/api/v1/tickets/{key}/cancel", "post"),
        ("/api/v1/initiatives/{initiative_id}", "patch"),
        ("/api/v1/wallet", "put"),
        ("/api/v1/agents/writing/automation", "post"),
    ]:
        operation = paths[path][method]
        assert any(p["name"] == "If-Match" and p["in"] == "header" for p in operation["parameters"]), path
        assert "ETag" in operation["responses"]["412"]["headers"], path
        assert "ETag" in operation["responses"]["200"]["headers"], path
    for path in [
        "/api/v1/tickets/{key}",
        "/api/v1/initiatives/{initiative_id}",
        "/api/v1/wallet",
        "/api/v1/agents/writing/automation",
    ]:
        assert "ETag" in paths[path]["get"]["responses"]["200"]["headers"], path
