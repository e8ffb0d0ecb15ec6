"""The maintained stage counts always equal a count of the tickets themselves."""

import random

import pytest
from peewee import fn

from storage import tickets
from storage.db import connection
from storage.models import Ticket

pytestmark = pytest.mark.both_backends


def counted_from_tickets() -> dict[str, int]:
    with connection():
        return dict(Ticket.select(Ticket.stage, fn.COUNT(Ticket.key)).group_by(Ticket.stage).tuples())


def maintained() -> dict[str, int]:
    with connection():
        return tickets.counts_by_stage()


def test_counts_follow_creates_moves_finishes_and_notifies(api):
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port", "stage": "active"})
    rng = random.Random(5)
    for n in range(1, 31):
        api.post(
            "/api/v1/tickets",
            json={
                "key": f"PORT-{n}",
                "initiative_id": "port",
                "title": "t",
                "stage": rng.choice(["agreement", "queued", "execute", "ci"]),
            },
        )
    for _ in range(120):
        key = f"PORT-{rng.randrange(1, 31)}"
        action = rng.choice(["move", "move", "move", "mark_done", "cancel"])
        if action == "move":
            target = rng.choice(["queued", "execute", "ci", "human_test", "blocked", "ship"])
            api.post(f"/api/v1/tickets/{key}/move", json={"to": target})  # many are refused: counts stay right
        else:
            api.post(f"/api/v1/tickets/{key}/{action}")
    for status in ["BACKFILL_READY", "SUCCESS", "STOP_NEED_TOPICS", "FAIL_QA", "SKIP_ALL_CAUGHT_UP"]:
        api.post("/api/v1/agents/writing/notify", auth="ci", json={"status": status})
    assert maintained() == counted_from_tickets()
    assert sum(maintained().values()) == 31


def test_recount_rebuilds_them(api, db_session):
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port"})
    api.post("/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "port", "title": "t"})
    Ticket.update(stage="done").execute()  # behind the service's back
    assert tickets.counts_by_stage() == {"agreement": 1}
    tickets.recount()
    assert tickets.counts_by_stage() == {"done": 1}


def test_emptying_the_database_empties_the_counts(api):
    from storage import reset

    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port"})
    api.post("/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "port", "title": "t"})
    with connection():
        reset.empty()
    assert maintained() == {}
