"""Idempotency-Key on notify: a retried report counts once; keys are kept at least a day."""

import pytest

from storage import outbox
from storage.db import connection, transaction
from storage.models import IdempotencyRecord

pytestmark = pytest.mark.both_backends

NOTIFY = "/api/v1/agents/writing/notify"
BODY = {"status": "BACKFILL_READY", "missing": 2, "items": [{"date": "2026-11-19"}]}


def notify(api, body, key):
    return api.post(NOTIFY, auth="ci", json=body, headers={"Idempotency-Key": key})


def counts(api):
    runs = api.get("/api/v1/agents/runs?agent_id=writing-daily", auth="ci").json["runs"]
    entries = api.get("/api/v1/tickets/WRITING-DAILY/timeline").json["entries"]
    with connection():
        posts = outbox.recent(kind="chat")
    return len(runs), len(entries), len(posts)


def test_a_repeated_key_returns_the_first_answer_and_records_nothing_new(api, clock):
    first = notify(api, BODY, "ci-run-1234-backfill")
    clock.advance(minutes=3)
    again = notify(api, dict(reversed(list(BODY.items()))), "ci-run-1234-backfill")  # same body, keys reordered

    assert again.status_code == 200
    assert again.json == first.json
    assert again.content == first.content  # the very same bytes
    assert again.headers.get("idempotent-replayed") == "true"
    assert "idempotent-replayed" not in first.headers
    assert counts(api) == (1, 1, 1)


def test_a_repeat_shows_the_ticket_as_the_first_answer_did_though_it_moved_since(api, clock):
    first = notify(api, BODY, "ci-run-1")
    clock.advance(minutes=5)
    moved = notify(api, {"status": "SUCCESS", "items": [{"slug": "a", "url": "https://x.example/a"}]}, "ci-run-2")
    assert moved.json["ticket"]["stage"] == "done"

    again = notify(api, BODY, "ci-run-1")

    assert again.content == first.content
    assert again.json["ticket"]["stage"] == "execute" and again.json["ticket"]["link"] is None
    assert api.get("/api/v1/tickets/WRITING-DAILY").json["stage"] == "done"
    assert counts(api) == (2, 2, 2)


def test_an_answer_kept_by_the_release_before_is_replayed_as_it_was(api, clock):
    """The release before kept the rendered body itself; a retry across an upgrade gets it back."""
    first = notify(api, BODY, "before-the-upgrade")
    with connection(), transaction():
        IdempotencyRecord.update(response=first.json).where(IdempotencyRecord.key == "before-the-upgrade").execute()
    clock.advance(minutes=3)

    again = notify(api, BODY, "before-the-upgrade")

    assert again.headers.get("idempotent-replayed") == "true"
    assert again.json == first.json
    assert counts(api) == (1, 1, 1)


def test_a_new_key_is_a_new_report(api):
    notify(api, BODY, "one")
    notify(api, BODY, "two")
    assert counts(api) == (2, 2, 2)


def test_the_same_key_with_another_body_is_422_and_records_nothing(api):
    notify(api, BODY, "k-1")
    result = notify(api, {**BODY, "missing": 3}, "k-1")
    assert result.status_code == 422
    assert result.json["type"].endswith("/idempotency-key-reused")
    assert counts(api) == (1, 1, 1)


def test_keys_are_kept_at_least_a_day_and_pruned_later(api, clock):
    notify(api, BODY, "old-key")
    clock.advance(hours=25)
    assert notify(api, BODY, "old-key").headers.get("idempotent-replayed") == "true"
    clock.advance(hours=24)  # 49 hours after it was stored
    notify(api, {"status": "SUCCESS"}, "another-key")  # storing a key prunes the expired ones
    reused = notify(api, BODY, "old-key")
    assert reused.headers.get("idempotent-replayed") is None
    assert counts(api) == (3, 3, 3)


def test_a_malformed_key_is_400_and_records_nothing(api):
    result = notify(api, BODY, "x" * 201)
    assert result.status_code == 400
    assert result.json["errors"][0]["path"] == "Idempotency-Key"
    assert api.get("/api/v1/tickets/WRITING-DAILY").status_code == 404


def test_without_a_key_every_report_counts(api):
    api.post(NOTIFY, auth="ci", json=BODY)
    api.post(NOTIFY, auth="ci", json=BODY)
    assert counts(api) == (2, 2, 2)


def test_the_header_is_in_the_openapi_document(api):
    operation = api.get("/api/v1/openapi.json", auth=None).json["paths"][NOTIFY]["post"]
    assert "Idempotency-Key" in [p["name"] for p in operation["parameters"]]
