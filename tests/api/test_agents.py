"""The agents strip, as a cron monitor would show it."""

from datetime import UTC, datetime, timedelta

import pytest

from storage import runs
from storage.db import connection, transaction

pytestmark = pytest.mark.both_backends


def test_every_agent_is_listed_never_run_and_not_late(api, clock):
    agents = {a["agent_id"]: a for a in api.get("/api/v1/agents").json["agents"]}
    assert list(agents) == [
        "writing-daily",
        "ops-daily-pulse",
        "ops-weekly-digest",
        "slot-steward",
        "idle-reclaim",
        "archivist",
        "poller",
        "reconciler",
    ]
    pulse = agents["ops-daily-pulse"]
    assert pulse["last_run_at"] is None and pulse["ok"] is None and pulse["late"] is False
    assert pulse["schedule"] == "0 8 * * *"
    assert pulse["schedule_in_words"] == "At 08:00 every day (UTC)"
    assert agents["poller"]["schedule_in_words"] == "Every 5 minutes"
    assert pulse["next_due_at"] == "2026-11-21T08:00:00.000000Z"  # the clock stands at 2026-11-20 10:00


def test_an_agent_that_missed_its_time_by_more_than_its_grace_is_late(api, clock):
    ran = datetime(2026, 11, 20, 8, 0, 3, tzinfo=UTC)
    with connection(), transaction():
        runs.record("ops-daily-pulse", status="OK", ok=True, started_at=ran, finished_at=ran + timedelta(seconds=2))
    clock.move_to(datetime(2026, 11, 21, 9, 0, tzinfo=UTC))
    assert _pulse(api)["late"] is False  # an hour past 08:00, within the two-hour grace
    clock.move_to(datetime(2026, 11, 21, 10, 30, tzinfo=UTC))
    pulse = _pulse(api)
    assert pulse["late"] is True and pulse["last_status"] == "OK" and pulse["ok"] is True


def test_the_agents_strip_needs_credentials(api):
    assert api.get("/api/v1/agents", auth=None).status_code == 401


def _pulse(api):
    return next(a for a in api.get("/api/v1/agents").json["agents"] if a["agent_id"] == "ops-daily-pulse")
