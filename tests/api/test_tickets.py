"""Tickets through HTTP: create, read, list, move, mark_done, cancel; each action leaves one timeline entry."""

import pytest


@pytest.fixture
def initiative(api):
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port the site", "stage": "active"})
    return "port"


def create(api, key="PORT-1", initiative="port", **extra):
    result = api.post(
        "/api/v1/tickets", json={"key": key, "initiative_id": initiative, "title": f"Ticket {key}", **extra}
    )
    assert result.status_code == 201, result.text
    return result.json


@pytest.mark.both_backends
def test_create_defaults_to_agreement_with_nulls_not_empty_strings(api, initiative):
    ticket = create(api)
    assert ticket["stage"] == "agreement"
    assert ticket["waiting_on"] is None and ticket["assigned_slot"] is None and ticket["link"] is None
    assert ticket["needs_you"] is False
    assert ticket["created_at"].endswith("Z")


@pytest.mark.both_backends
def test_an_existing_key_is_409(api, initiative):
    create(api)
    again = api.post("/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "port", "title": "again"})
    assert again.status_code == 409
    assert again.headers["content-type"] == "application/problem+json"


@pytest.mark.both_backends
def test_unknown_initiative_is_404_and_creates_nothing(api):
    result = api.post("/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "nope", "title": "x"})
    assert result.status_code == 404
    assert result.json["errors"] == [{"path": "/initiative_id", "message": "no initiative 'nope'"}]
    assert api.get("/api/v1/tickets/PORT-1").status_code == 404


@pytest.mark.parametrize(
    ("body", "paths"),
    [
        ({"key": "port-1", "initiative_id": "port", "title": "x"}, ["/key"]),
        ({"key": "PORT-1", "initiative_id": "port", "title": 7}, ["/title"]),
        ({"key": "PORT-1", "initiative_id": "port", "title": "x", "stage": "nowhere"}, ["/stage"]),
        ({"key": "PORT-1", "initiative_id": "port", "title": "x", "colour": "red"}, ["/colour"]),
        ({"initiative_id": "port"}, ["/key", "/title"]),
        ([], [""]),
    ],
)
def test_bad_bodies_are_422_with_json_pointers_and_change_nothing(api, initiative, body, paths):
    result = api.post("/api/v1/tickets", json=body)
    assert result.status_code == 422
    assert sorted(e["path"] for e in result.json["errors"]) == paths
    assert api.get("/api/v1/tickets").json["tickets"] == []


@pytest.mark.both_backends
def test_read_includes_the_newest_timeline_entries(api, initiative):
    create(api)
    api.post("/api/v1/tickets/PORT-1/move", json={"to": "queued"})
    ticket = api.get("/api/v1/tickets/PORT-1").json
    assert [e["kind"] for e in ticket["timeline"]] == ["stage_changed", "created"]
    assert ticket["timeline"][0]["data"]["from"] == "agreement"


@pytest.mark.both_backends
def test_a_forbidden_move_is_409_naming_the_current_stage_and_changes_nothing(api, initiative):
    create(api)
    result = api.post("/api/v1/tickets/PORT-1/move", json={"to": "ship"})
    assert result.status_code == 409
    assert result.json["current_stage"] == "agreement"
    assert "agreement" in result.json["detail"]
    ticket = api.get("/api/v1/tickets/PORT-1").json
    assert ticket["stage"] == "agreement"
    assert len(ticket["timeline"]) == 1


@pytest.mark.both_backends
def test_a_full_delivery_path(api, initiative):
    create(api)
    for stage in ["queued", "execute", "ci", "human_test", "human_merge", "ship", "done"]:
        result = api.post("/api/v1/tickets/PORT-1/move", json={"to": stage})
        assert result.status_code == 200, result.text
        assert result.json["stage"] == stage
    entries = api.get("/api/v1/tickets/PORT-1/timeline").json["entries"]
    assert len(entries) == 8  # created + seven moves, one entry each


@pytest.mark.both_backends
def test_move_sets_waiting_on_and_needs_you_follows(api, initiative):
    create(api, stage="queued")
    moved = api.post("/api/v1/tickets/PORT-1/move", json={"to": "execute", "waiting_on": "agent"}).json
    assert moved["waiting_on"] == "agent" and moved["needs_you"] is True
    moved = api.post("/api/v1/tickets/PORT-1/move", json={"to": "ci", "waiting_on": "ci"}).json
    assert moved["needs_you"] is False
    moved = api.post("/api/v1/tickets/PORT-1/move", json={"to": "human_test"}).json
    assert moved["waiting_on"] is None and moved["needs_you"] is True


@pytest.mark.both_backends
@pytest.mark.parametrize("action,final", [("mark_done", "done"), ("cancel", "cancelled")])
def test_mark_done_and_cancel_from_a_live_stage_then_never_again(api, initiative, action, final):
    create(api, stage="execute")
    result = api.post(f"/api/v1/tickets/PORT-1/{action}", json={"reason": "shipped by hand"})
    assert result.status_code == 200 and result.json["stage"] == final
    for again in ("mark_done", "cancel"):
        refused = api.post(f"/api/v1/tickets/PORT-1/{again}")
        assert refused.status_code == 409
        assert refused.json["current_stage"] == final
    timeline = api.get("/api/v1/tickets/PORT-1/timeline").json["entries"]
    assert len(timeline) == 2
    assert timeline[0]["data"]["reason"] == "shipped by hand"


def test_mark_done_without_a_body_works(api, initiative):
    create(api, stage="queued")
    assert api.post("/api/v1/tickets/PORT-1/mark_done").json["stage"] == "done"


def test_unknown_ticket_actions_are_404(api):
    for action in ("move", "mark_done", "cancel"):
        result = api.post(f"/api/v1/tickets/NOPE-1/{action}", json={"to": "queued"} if action == "move" else {})
        assert result.status_code == 404


@pytest.mark.both_backends
def test_list_filters_and_pages_by_key(api, initiative):
    for n in range(1, 8):
        create(api, key=f"PORT-{n}", stage="queued" if n % 2 else "execute")
    first = api.get("/api/v1/tickets?limit=3").json
    assert [t["key"] for t in first["tickets"]] == ["PORT-1", "PORT-2", "PORT-3"]
    second = api.get(f"/api/v1/tickets?limit=3&cursor={first['next']}").json
    assert [t["key"] for t in second["tickets"]] == ["PORT-4", "PORT-5", "PORT-6"]
    third = api.get(f"/api/v1/tickets?limit=3&cursor={second['next']}").json
    assert [t["key"] for t in third["tickets"]] == ["PORT-7"] and third["next"] is None
    queued = api.get("/api/v1/tickets?stage=queued").json["tickets"]
    assert [t["key"] for t in queued] == ["PORT-1", "PORT-3", "PORT-5", "PORT-7"]
    assert api.get("/api/v1/tickets?initiative_id=other").json["tickets"] == []


@pytest.mark.both_backends
def test_needs_you_filter(api, initiative):
    create(api, key="PORT-1", stage="human_test")
    create(api, key="PORT-2", stage="queued")
    assert [t["key"] for t in api.get("/api/v1/tickets?needs_you=true").json["tickets"]] == ["PORT-1"]


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=501", "limit=ten", "cursor=%%%", "stage=nowhere", "needs_you=maybe"]
)
def test_bad_query_parameters_are_400(api, query):
    result = api.get(f"/api/v1/tickets?{query}")
    assert result.status_code == 400
    assert result.json["errors"][0]["path"] in {"limit", "cursor", "stage", "needs_you"}


def test_the_writing_ticket_cannot_be_created_then_moved_by_hand(api, initiative):
    create(api, key="WRITING-DAILY", initiative="port", stage="queued")
    result = api.post("/api/v1/tickets/WRITING-DAILY/move", json={"to": "execute"})
    assert result.status_code == 409
    assert "notify" in result.json["detail"]


@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("path", "values"),
    [
        ("/api/v1/tickets", [7]),  # a number where a key belongs
        ("/api/v1/agents/runs", [10**20]),  # beyond a 64-bit id
        ("/api/v1/agents/runs", ["12"]),  # text where an id belongs
        ("/api/v1/router/decisions", [1, 2]),  # the wrong length
        ("/api/v1/tickets", ["PORT-1\x00"]),
    ],
)
def test_a_hand_made_cursor_is_400_not_500(api, path, values):
    from storage.paging import encode_cursor

    result = api.get(f"{path}?cursor={encode_cursor(values)}")
    assert result.status_code == 400
    assert result.json["errors"][0]["path"] == "cursor"


@pytest.mark.both_backends
def test_a_ticket_moved_to_done_waits_on_no_one(api, initiative):
    create(api, stage="ship")
    moved = api.post("/api/v1/tickets/PORT-1/move", json={"to": "done", "waiting_on": "agent"}).json
    assert moved["stage"] == "done" and moved["waiting_on"] is None and moved["needs_you"] is False
    assert api.get("/api/v1/tickets?needs_you=true").json["tickets"] == []
