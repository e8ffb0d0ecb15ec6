"""`svc backup PATH` while a real `svc serve` takes writes: the copy is whole (integrity check), and a service
started on it has every receipt and decision acknowledged before the backup began. On PostgreSQL it points
at pg_dump and exits non-zero."""

from __future__ import annotations

import sqlite3
import stat
import subprocess

import pytest
import requests

from conftest import BACKEND, BASIC, CI_SECRET
from load_kit import Firing, every_page
from processes import SVC, start_service, svc_env, wait_until

pytestmark = pytest.mark.process

ENV = {"SVC_CI_WEBHOOK_SECRET": CI_SECRET, "SVC_BASIC_AUTH": BASIC, "SVC_THREADS": "4"}


def backup(tmp_path, database_url: str, target) -> subprocess.CompletedProcess:
    env = svc_env(DATABASE_URL=database_url, SVC_DATA_DIR=str(tmp_path / "data"))
    return subprocess.run([SVC, "backup", str(target)], env=env, capture_output=True, text=True, timeout=120)


def test_a_backup_taken_under_writes_serves_every_write_acknowledged_before_it(tmp_path):
    if BACKEND != "sqlite":
        pytest.skip("svc backup copies SQLite databases; this run is on PostgreSQL (see the pg_dump test below)")
    live = f"sqlite:///{tmp_path / 'live.sqlite3'}"
    copy = tmp_path / "backups" / "svc-copy.sqlite3"
    copy.parent.mkdir()
    server, base = start_service(tmp_path, live, **ENV)
    try:
        firing = Firing([base], CI_SECRET, notifiers=2, eventers=2).start()
        wait_until(lambda: firing.acked.total >= 10, timeout=60, what="writes")
        # A read held open (as a long board query would) keeps everything committed after it in the WAL, out of
        # the main file: a copy of the file alone would miss those writes, the backup must read them there.
        reader = sqlite3.connect(tmp_path / "live.sqlite3")
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM router_decision").fetchone()
        start = firing.acked.total
        wait_until(lambda: firing.acked.total >= start + 60, timeout=60, what="writes behind the read")
        with firing.acked.lock:
            receipts, runs = set(firing.acked.receipts), set(firing.acked.runs)
            decisions = dict(firing.acked.decisions)
        made = backup(tmp_path, live, copy)  # the writers keep going while it copies
        reader.rollback()
        reader.close()
        during = firing.acked.total
        wait_until(lambda: firing.acked.total >= during + 20, timeout=60, what="writes after the backup")
        acked = firing.stop()
    finally:
        server.stop()
    assert made.returncode == 0, made.stderr
    assert f"to {copy}" in made.stdout and "integrity ok" in made.stdout
    assert acked.refused == [] and acked.unanswered == 0
    assert len(acked.receipts) > len(receipts) and len(acked.decisions) > len(decisions)
    with sqlite3.connect(copy) as check:
        assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert not copy.with_name(copy.name + "-wal").exists()

    (tmp_path / "restored").mkdir()
    restored, base = start_service(tmp_path / "restored", f"sqlite:///{copy}", **ENV)
    try:
        basic = requests.Session()
        basic.auth = tuple(BASIC.split(":", 1))
        ci = requests.Session()
        ci.headers["X-Svc-CI-Secret"] = CI_SECRET
        timeline = every_page(basic, base + "/api/v1/tickets/WRITING-DAILY/timeline", "entries")
        kept_receipts = {e["id"] for e in timeline if e["kind"] == "writing_report"}
        kept_runs = {r["id"] for r in every_page(ci, base + "/api/v1/agents/runs?agent_id=writing-daily", "runs")}
        kept_decisions = {
            d["event_id"]: d["id"] for d in every_page(basic, base + "/api/v1/router/decisions", "decisions")
        }
        assert receipts <= kept_receipts, sorted(receipts - kept_receipts)
        assert runs <= kept_runs, sorted(runs - kept_runs)
        assert {e: kept_decisions.get(e) for e in decisions} == decisions
        # Nothing in the copy that the live service did not acknowledge.
        assert kept_receipts <= acked.receipts and set(kept_decisions) <= set(acked.decisions)
        # The copy is a database like any other: it takes writes.
        answer = ci.post(base + "/api/v1/agents/writing/notify", json={"status": "SUCCESS"}, timeout=10)
        assert answer.status_code == 200, answer.text
    finally:
        restored.stop()


def migrated_sqlite(tmp_path) -> str:
    if BACKEND != "sqlite":
        pytest.skip("svc backup copies SQLite databases; this run is on PostgreSQL")
    live = f"sqlite:///{tmp_path / 'live.sqlite3'}"
    migrated = subprocess.run(
        [SVC, "migrate"],
        env=svc_env(DATABASE_URL=live, SVC_DATA_DIR=str(tmp_path / "data")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert migrated.returncode == 0, migrated.stderr
    return live


def test_the_copy_is_readable_by_its_owner_alone(tmp_path):
    """It holds people's password hashes: 0600 like the credentials file, whatever the umask says."""
    live = migrated_sqlite(tmp_path)
    made = backup(tmp_path, live, tmp_path / "copy.sqlite3")
    assert made.returncode == 0, made.stderr
    assert stat.S_IMODE((tmp_path / "copy.sqlite3").stat().st_mode) == 0o600


def test_a_backup_never_overwrites_a_file(tmp_path):
    live = migrated_sqlite(tmp_path)
    there = tmp_path / "there.sqlite3"
    there.write_bytes(b"keep me")
    made = backup(tmp_path, live, there)
    assert made.returncode == 1 and "exists already" in made.stderr
    assert there.read_bytes() == b"keep me"
    itself = backup(tmp_path, live, tmp_path / "live.sqlite3")
    assert itself.returncode == 2 and "the database itself" in itself.stderr
    nothing = backup(tmp_path, f"sqlite:///{tmp_path / 'absent.sqlite3'}", tmp_path / "copy.sqlite3")
    assert nothing.returncode == 1 and "there is no database" in nothing.stderr
    assert not (tmp_path / "copy.sqlite3").exists()


def test_a_backup_into_a_folder_that_does_not_exist_says_so(tmp_path):
    live = migrated_sqlite(tmp_path)
    made = backup(tmp_path, live, tmp_path / "backups" / "copy.sqlite3")
    folder = tmp_path / "backups"
    assert made.returncode == 1
    assert made.stderr == f"svc backup: there is no folder {folder}: create it first (mkdir -p {folder})\n"
    (tmp_path / "a-file").write_text("")
    under_a_file = backup(tmp_path, live, tmp_path / "a-file" / "copy.sqlite3")
    assert under_a_file.returncode == 1 and f"{tmp_path / 'a-file'} is not a directory" in under_a_file.stderr
    folder.mkdir()
    assert backup(tmp_path, live, folder / "copy.sqlite3").returncode == 0


@pytest.mark.both_backends
def test_on_postgresql_it_says_to_use_pg_dump_and_exits_non_zero(tmp_path, session_database_url):
    url = session_database_url or "postgresql://svc@db.invalid:5432/svc"
    made = backup(tmp_path, url, tmp_path / "copy.dump")
    assert made.returncode == 2
    assert "pg_dump" in made.stderr and "svc backup copies SQLite only" in made.stderr
    assert not (tmp_path / "copy.dump").exists()
