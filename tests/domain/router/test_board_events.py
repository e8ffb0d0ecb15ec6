"""The service's own events: every stage change reaches the router through the outbox, and the poller."""

from datetime import timedelta

import pytest

from domain.ops.runs import Trigger
from domain.router.board_events import ROUTE_KIND
from jobs import assembly
from jobs.delivery import OutboxDeliverer
from storage import outbox
from storage.db import connection

from events_kit import ALLOWLIST, seed_board
from testclient import ApiClient


@pytest.fixture
def config(config_factory):
    return config_factory(router_allowlist=ALLOWLIST)


@pytest.fixture
def api(app_factory, config):
    api = ApiClient(
        app_factory(config), basic="admin:correct-horse-battery", ci_secret="test-ci-secret-0123456789abcdef"
    )
    seed_board(api, tickets={"PORT-12": "agreement"})
    return api


def route_queued(config, clock) -> int:
    handlers, recorders = assembly.outbox_handlers(config, clock)
    return OutboxDeliverer(handlers, clock, recorders=recorders).drain(kinds=[ROUTE_KIND])


def decisions(api):
    return api.get("/api/v1/router/decisions?source=svc").json["decisions"]


def test_a_stage_change_queues_one_envelope_and_records_no_decision_in_its_own_request(api, config, clock):
    api.post("/api/v1/tickets/PORT-12/move", json={"to": "queued"})
    with connection():
        queued = [m for m in outbox.recent(kind=ROUTE_KIND) if m.payload["subject"]["id"] == "PORT-12"]
    # creation and the move: two envelopes, routed later by the jobs process
    assert [m.payload["transition"]["kind"] for m in queued] == ["state_changed", "state_changed"]
    assert decisions(api) == []
    assert route_queued(config, clock) == 2
    kinds = [
        (d["kind"], d["envelope"]["transition"]["from"], d["envelope"]["transition"]["to"]) for d in decisions(api)
    ]
    assert kinds == [("state_changed", "agreement", "queued"), ("state_changed", None, "agreement")]


def test_each_stage_change_emits_state_changed_needs_you_cleared_or_stuck(api, config, clock):
    for to in ("queued", "execute", "ci", "human_test", "human_merge", "ship", "blocked"):
        assert api.post("/api/v1/tickets/PORT-12/move", json={"to": to}).status_code == 200
    api.post("/api/v1/tickets/PORT-12/move", json={"to": "execute", "waiting_on": "agent_failed"})
    api.post("/api/v1/tickets/PORT-12/mark_done")
    route_queued(config, clock)
    seen = [
        (d["kind"], d["envelope"]["transition"]["from"], d["envelope"]["transition"]["to"])
        for d in reversed(decisions(api))
    ]
    assert seen == [
        ("state_changed", None, "agreement"),
        ("state_changed", "agreement", "queued"),
        ("state_changed", "queued", "execute"),
        ("state_changed", "execute", "ci"),
        ("needs_you", "ci", "human_test"),
        ("needs_you", "human_test", "human_merge"),
        ("cleared", "human_merge", "ship"),
        ("stuck", "ship", "blocked"),
        ("needs_you", "blocked", "agent_failed"),
        ("cleared", "agent_failed", "done"),
    ]


def test_a_move_to_execute_by_an_allowlisted_person_would_dispatch_the_coder(api, config, clock):
    api.post("/api/v1/tickets/PORT-12/move", json={"to": "queued"})
    api.post("/api/v1/tickets/PORT-12/move", json={"to": "execute"})
    route_queued(config, clock)
    newest = decisions(api)[0]
    assert newest["envelope"]["actor"] == {"kind": "human", "id": "svc:admin", "roles": []}
    assert newest["envelope"]["dispatch_hints"]["eligible_for_worker"] is True
    assert (newest["outcome"], newest["role"]) == ("would_dispatch", "coder")


@pytest.mark.both_backends
def test_routing_a_queued_event_twice_records_one_decision(api, config, clock):
    api.post("/api/v1/tickets/PORT-12/move", json={"to": "queued"})
    with connection():
        message = outbox.recent(kind=ROUTE_KIND)[0]
    handlers, _ = assembly.outbox_handlers(config, clock)
    from jobs.delivery import Attempt

    attempt = Attempt(message.id, ROUTE_KIND, message.payload, 0, False)
    first = handlers[ROUTE_KIND](attempt)
    again = handlers[ROUTE_KIND](attempt)  # a crash between routing and marking the message sent
    assert first.result == again.result
    assert len(decisions(api)) == 1


@pytest.mark.both_backends
def test_the_poller_asks_for_dispatch_of_queued_tickets_with_no_decision_in_the_window(api, config, clock):
    api.post("/api/v1/tickets/PORT-12/move", json={"to": "queued"})
    route_queued(config, clock)  # the move's own decision
    poller = assembly.scheduled_jobs(config, clock)["poller"]
    with connection():
        assert poller(Trigger("schedule", scheduled_for=clock())) == 0  # heard from within the window
    clock.advance(minutes=31)
    with connection():
        assert poller(Trigger("schedule", scheduled_for=clock())) == 1
    polled = api.get("/api/v1/router/decisions?source=poller").json["decisions"]
    assert [(d["kind"], d["subject_id"], d["envelope"]["transition"]["to"]) for d in polled] == [
        ("dispatch_requested", "PORT-12", "queued")
    ]
    clock.advance(minutes=5)
    with connection():
        assert poller(Trigger("schedule", scheduled_for=clock())) == 0  # its own decision is recent
    run = api.get("/api/v1/agents").json["agents"]
    poller_row = next(a for a in run if a["agent_id"] == "poller")
    assert poller_row["ok"] is True


def test_the_poller_window_is_configurable(app_factory, config_factory, clock):
    config = config_factory(router_allowlist=ALLOWLIST, poller_window_minutes=5)
    api = ApiClient(
        app_factory(config), basic="admin:correct-horse-battery", ci_secret="test-ci-secret-0123456789abcdef"
    )
    seed_board(api, tickets={"PORT-12": "queued"})
    clock.advance(minutes=6)
    poller = assembly.scheduled_jobs(config, clock)["poller"]
    with connection():
        assert poller(Trigger("schedule", scheduled_for=clock() - timedelta(seconds=1))) == 1


def test_a_person_signed_in_as_the_generated_user_is_human_and_the_agents_are_systems():
    from domain.router.board_events import actor_of

    assert actor_of("svc")["kind"] == "human"  # the generated basic-auth user is a person at a browser
    assert actor_of("admin")["kind"] == "human"
    assert actor_of("ci")["kind"] == "system"
    assert actor_of("slot-steward")["kind"] == "system"
