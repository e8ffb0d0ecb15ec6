"""`svc archive [--before ISO-TIME]`, run in this process (`svc.cli.main`): it runs the archivist once, says how many
rows of each kind it moved, and refuses a time it cannot read in one line, changing nothing. What the archivist moves
and keeps is `tests/domain/ops/test_archivist.py`'s."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from domain.ops.archivist import read
from storage import db as storage_db
from storage import decisions, migrations
from storage.db import connection, transaction
from storage.models import RouterDecision
from svc.cli import main

from conftest import BASIC, CHEAP_PASSWORD_HASHING, CI_SECRET


@pytest.fixture
def svc_archive(monkeypatch, capsys, tmp_path, database_url):
    for name, value in {**CHEAP_PASSWORD_HASHING, "SVC_BASIC_AUTH": BASIC, "SVC_CI_WEBHOOK_SECRET": CI_SECRET}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SVC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DATABASE_URL", database_url)

    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = main(["archive", *args])
        finally:
            obj = storage_db.db.obj
            if obj is not None and hasattr(obj, "close_all"):
                obj.close_all()
        out, err = capsys.readouterr()
        return code, out, err

    return run


def record_decisions(database_url: str, *moments: datetime) -> None:
    storage_db.bind(storage_db.open_database(database_url))
    migrations.migrate()
    with connection(), transaction():
        for at in moments:
            decisions.record(evaluated_at=at, mode="shadow", outcome="no_action", gates=[], dispatched=False)


def test_svc_archive_moves_what_is_older_than_keep_days_or_before_and_says_how_many(
    svc_archive, tmp_path, database_url
):
    now = datetime.now(UTC)
    # and a recent one: the newest row of a table stays
    record_decisions(database_url, now - timedelta(days=500), now - timedelta(days=100), now - timedelta(days=1))
    code, out, err = svc_archive()
    assert (code, err) == (0, "")
    assert "decisions 1\n" in out and "timeline 0\n" in out
    (written,) = (tmp_path / "data" / "archive").glob("decisions-*.jsonl.gz")
    assert [line["outcome"] for line in read(written)] == ["no_action"]

    code, out, _ = svc_archive("--before", (now - timedelta(days=50)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert code == 0 and "decisions 1\n" in out
    with connection():
        assert RouterDecision.select().count() == 1  # the recent one


def test_svc_archive_refuses_a_time_it_cannot_read_and_changes_nothing(svc_archive, tmp_path, database_url):
    record_decisions(database_url, datetime.now(UTC) - timedelta(days=500))
    code, out, err = svc_archive("--before", "last tuesday")
    assert code == 2 and out == ""
    assert err == (
        "svc archive: --before: expected an ISO 8601 time with its zone, like 2025-10-01T00:00:00Z; "
        "got 'last tuesday'\n"
    )
    assert not (tmp_path / "data" / "archive").exists()
    with connection():
        assert RouterDecision.select().count() == 1
