"""The database layer: durable SQLite settings, migrations safe to run twice, compare-and-swap."""

from datetime import UTC, datetime

import pytest

from storage import db as storage_db
from storage import migrations, tickets
from storage.models import Initiative, Ticket

pytestmark = pytest.mark.both_backends


def test_sqlite_runs_in_wal_with_durable_commits(app, db_session):
    if storage_db.is_postgres():
        pytest.skip("SQLite settings; this run is on PostgreSQL")
    pragma = lambda name: storage_db.db.execute_sql(f"PRAGMA {name}").fetchone()[0]  # noqa: E731
    assert pragma("journal_mode") == "wal"
    assert pragma("synchronous") == 2  # FULL
    assert pragma("busy_timeout") == 10_000
    assert pragma("foreign_keys") == 1


def test_migrations_are_safe_to_run_twice(app):
    assert migrations.migrate() == []
    assert migrations.migrate() == []
    assert migrations.current_version() == migrations.MIGRATIONS[-1][0]


def _ticket(now):
    Initiative.create(id="port", name="Port", stage="active", created_at=now, updated_at=now)
    return Ticket.create(
        key="PORT-1",
        initiative="port",
        title="t",
        stage="queued",
        needs_you=False,
        version=1,
        stage_changed_at=now,
        created_at=now,
        updated_at=now,
    )


def test_compare_and_swap_lets_only_the_first_writer_win(app, db_session):
    now = datetime(2026, 11, 20, tzinfo=UTC)
    row = _ticket(now)
    first, second = tickets.get("PORT-1"), tickets.get("PORT-1")
    assert tickets.compare_and_swap(first, expected_stage="queued", expected_version=1, changes={"stage": "execute"})
    assert not tickets.compare_and_swap(
        second, expected_stage="queued", expected_version=1, changes={"stage": "blocked"}
    )
    assert tickets.get(row.key).stage == "execute"
    assert tickets.get(row.key).version == 2


def test_timestamps_come_back_as_aware_utc(app, db_session):
    now = datetime(2026, 11, 20, 8, 30, 15, 123456, tzinfo=UTC)
    _ticket(now)
    assert tickets.get("PORT-1").stage_changed_at == now


def test_the_stuck_count_leaves_out_the_keys_it_is_told_to_in_every_stage(api):
    # Blocked tickets are counted from the maintained stage counts, the others by their last stage change.
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port", "stage": "active"})
    for key, stage in [("PORT-1", "blocked"), ("PORT-2", "blocked"), ("PORT-3", "execute"), ("PORT-4", "execute")]:
        assert api.post("/api/v1/tickets", json={"key": key, "initiative_id": "port", "title": "t", "stage": stage})
    later = datetime(2100, 1, 1, tzinfo=UTC)
    live = ("queued", "execute", "blocked")
    with storage_db.connection():
        assert tickets.count_stuck(changed_before=later, live_stages=live) == 4
        assert tickets.count_stuck(changed_before=later, live_stages=live, exclude_keys=("PORT-1", "PORT-3")) == 2
        assert tickets.count_stuck(changed_before=later, live_stages=live, exclude_keys=("PORT-2",)) == 3
        listed = tickets.stuck(changed_before=later, live_stages=live, limit=10, exclude_keys=("PORT-1", "PORT-3"))
        assert sorted(t.key for t in listed) == ["PORT-2", "PORT-4"]


def test_a_swap_writes_every_change_from_the_row_as_read_and_leaves_the_rest_as_it_was(app, db_session):
    """A change to the value a column had as read is left out of the SET; the row then holds every change, the
    columns not changed keep their values, and the version moves on once."""
    now = datetime(2026, 11, 20, tzinfo=UTC)
    later = datetime(2026, 11, 21, 9, 30, tzinfo=UTC)
    _ticket(now)
    row = tickets.get("PORT-1")
    read = {"stage": row.stage, "needs_you": row.needs_you}
    changes = {"stage": "queued", "needs_you": True, "waiting_on": "you", "updated_at": later}
    assert tickets.compare_and_swap(row, expected_stage="queued", expected_version=1, changes=changes, read=read)
    assert (row.needs_you, row.waiting_on, row.version) == (True, "you", 2)
    stored = tickets.get("PORT-1")
    assert (stored.stage, stored.needs_you, stored.waiting_on, stored.version) == ("queued", True, "you", 2)
    assert (stored.updated_at, stored.stage_changed_at, stored.title) == (later, now, "t")

    again = {"stage": "execute", "needs_you": True, "updated_at": later}
    read = {"stage": stored.stage, "needs_you": stored.needs_you}
    assert tickets.compare_and_swap(stored, expected_stage="queued", expected_version=2, changes=again, read=read)
    assert (tickets.get("PORT-1").stage, tickets.get("PORT-1").needs_you, tickets.get("PORT-1").version) == (
        "execute",
        True,
        3,
    )
