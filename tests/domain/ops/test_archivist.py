"""The archivist (`domain/ops/archivist.py`): what is older than SVC_KEEP_DAYS leaves for monthly gzip JSON-lines
files, each row once, even across a crash between the write and the delete; what is live stays; the scorecard answers
the same; a backtest says how many decisions of its range it could not read.

Rows are seeded directly through the storage functions at past times, on the suite's fake clock. On both backends:
what moves is decided by SQL (the conditions, the cascade of the decisions' foreign keys) and a crash is about what
one transaction left."""

from __future__ import annotations

import gzip
import itertools
import subprocess
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import pytest

from domain import accounts
from domain.clock import iso
from domain.ops.archivist import Archivist, read
from domain.ops.runs import Trigger
from domain.router import scorecard
from domain.router.gates import GATE_NAMES
from jobs import assembly
from storage import decisions, jobs, outbox, reconciliation, runs, timeline
from storage.db import connection, is_postgres, sqlite_path, transaction
from storage.models import (
    Account,
    AgentRun,
    DispatchJob,
    OutboxMessage,
    ReconciliationGap,
    RouterDecision,
    RouterPolicyVersion,
    ScorecardEntry,
    TimelineEntry,
)

from conftest import PASSWORDS
from events_kit import seed_board

KINDS = ("timeline", "runs", "outbox", "jobs", "gaps", "decisions")
_ids = itertools.count(1)


@pytest.fixture
def board(api, clock):
    """A finished ticket (PORT-1, cancelled) and a live one (PORT-2, queued)."""
    seed_board(api, tickets={"PORT-1": "queued", "PORT-2": "queued"})
    cancelled = api.post("/api/v1/tickets/PORT-1/cancel", json={})
    assert cancelled.status_code == 200, cancelled.text
    return api


def midnight(moment: datetime) -> datetime:
    return datetime.combine(moment.astimezone(UTC).date(), time(), tzinfo=UTC)


def decision(at: datetime, *, subject: str = "PORT-1", outcome: str = "would_dispatch", taken_up: bool = False) -> int:
    """A judged decision at `at`, accepted, with its scorecard entry (and the team taking it up an hour later)."""
    event_id = f"evt-{next(_ids)}"
    gates = [
        {"gate": gate, "passed": outcome == "would_dispatch" or gate != "authorization", "reason": "seeded"}
        for gate in GATE_NAMES
    ]
    with transaction():
        row = decisions.record(
            event_id=event_id,
            evaluated_at=at,
            mode="shadow",
            dispatched=False,
            source="forge",
            kind="opened",
            subject_id=subject,
            outcome=outcome,
            role="coder",
            gates=gates,
            envelope={"id": event_id},
        )
        decisions.accept(event_id, row, at=at)
        scorecard.record_decision(
            decision_id=row.id, subject_id=subject, role="coder", outcome=outcome, gates=gates, at=at
        )
        if taken_up:
            scorecard.record_signal(subject, ("coder",), at=at + timedelta(hours=1))
    return row.id


def seed(now: datetime) -> dict[str, object]:
    """Old rows of every kind (two months, 500 and 470 days back), new ones (10 days back), and old live ones."""
    old = [now - timedelta(days=500), now - timedelta(days=470)]
    new = now - timedelta(days=10)
    made: dict[str, object] = {"old": {k: set() for k in KINDS}, "new": {k: set() for k in KINDS}}
    for when, group in ((old[0], "old"), (old[1], "old"), (new, "new")):
        ids = made[group]
        ids["decisions"] |= {
            decision(when, taken_up=True),
            decision(when + timedelta(hours=2)),
            decision(when + timedelta(hours=3), outcome="blocked"),
        }
        with transaction():
            ids["timeline"].add(timeline.append("PORT-1", kind="note", summary="done long ago", at=when).id)
            ids["runs"].add(runs.record("poller", status="OK", ok=True, started_at=when, finished_at=when).id)
            sent = outbox.enqueue("chat", {"content": "hello"}, at=when)
            OutboxMessage.update(status="sent", sent_at=when).where(OutboxMessage.id == sent.id).execute()
            ids["outbox"].add(sent.id)
            job = jobs.insert(
                decision_id=decision_row(ids), event_id=None, ticket="PORT-1", role="coder", rule=None,
                state="queued", at=when,
            )  # fmt: skip
            DispatchJob.update(state="succeeded", finished_at=when).where(DispatchJob.id == job.id).execute()
            ids["jobs"].add(job.id)
            gap("given_up", when)
            ids["gaps"].add(ReconciliationGap.select().order_by(ReconciliationGap.id.desc()).first().id)
    with transaction():
        # Live, however old: a live ticket's entry, an open job and its decision, a pending message, an open gap.
        made["live_entry"] = timeline.append("PORT-2", kind="note", summary="still going", at=old[0]).id
        made["pending"] = outbox.enqueue("chat", {"content": "later"}, at=old[0]).id
        gap("redelivered", old[0], guid="guid-open")
    # (a month later than the oldest: the oldest day is archived whole, and the scorecard still starts there)
    made["open_decision"] = decision(old[1], subject="PORT-2")
    with transaction():
        made["open_job"] = jobs.insert(
            decision_id=made["open_decision"], event_id=None, ticket="PORT-2", role="coder", rule=None,
            state="queued", at=old[1],
        ).id  # fmt: skip
    return made


def gap(state: str, at: datetime, *, guid: str | None = None) -> None:
    guid = guid or f"guid-{next(_ids)}"
    reconciliation.open_gap(
        sender="github", hook="repos/o/r/hooks/1", delivery="1", guid=guid, event="push", state=state, attempts=1,
        detail="", at=at,
    )  # fmt: skip


def decision_row(ids) -> int:
    return min(ids["decisions"])


def archivist(config, clock, **kwargs) -> Archivist:
    return Archivist(
        config, clock, keep_scorecard=scorecard.keep_through, scorecard_kept_until=scorecard.kept_until, **kwargs
    )


def archive_lines(directory: Path) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {k: [] for k in KINDS}
    for path in sorted(directory.glob("*.jsonl.gz")):
        found[path.name.split("-", 1)[0]] += read(path)
    return found


def identities(kind: str, lines: list[dict]) -> list:
    return [(line["sender"], line["hook"], line["guid"]) if kind == "gaps" else line["id"] for line in lines]


def scorecards(api, now: datetime) -> dict[str, dict]:
    first = midnight(now - timedelta(days=500))
    ranges = {
        "whole": "",
        "archived days": f"?since={iso(first)}&until={iso(first + timedelta(days=40))}",
        "across the cutoff": f"?since={iso(first + timedelta(days=20))}&until={iso(midnight(now))}",
        "recent": f"?since={iso(midnight(now - timedelta(days=30)))}",
    }
    answers = {}
    for name, query in ranges.items():
        answer = api.get(f"/api/v1/router/scorecard{query}")
        assert answer.status_code == 200, answer.text
        answers[name] = answer.json
    return answers


pytestmark = pytest.mark.usefixtures("db_session")


@pytest.mark.both_backends
def test_old_rows_move_to_monthly_files_in_their_api_shapes_and_live_ones_stay(board, config, clock):
    now = clock()
    made = seed(now)
    with transaction():
        accounts.add(
            "ada", "operator", "correct horse battery", passwords=PASSWORDS, clock=lambda: now - timedelta(600)
        )
    policy_versions = RouterPolicyVersion.select().count()
    before = scorecards(board, now)
    coder = before["whole"]["rules"]["coder"]
    assert (coder["confirmed"], coder["not_taken_up"], coder["held"]) == (3, 4, 3)
    assert before["archived days"]["rules"]["coder"]["confirmed"] == 2
    scorecard_rows = ScorecardEntry.select().count()

    report = archivist(config, clock).run(Trigger("command"))

    old, new = made["old"], made["new"]
    assert report.moved == {kind: len(old[kind]) for kind in KINDS}
    files = sorted(p.name for p in (config.data_dir / "archive").glob("*.jsonl.gz"))
    month = [(now - timedelta(days=d)).strftime("%Y-%m") for d in (500, 470)]
    assert files == sorted(f"{kind}-{m}.jsonl.gz" for kind in KINDS for m in month)
    lines = archive_lines(config.data_dir / "archive")
    for kind in ("timeline", "runs", "outbox", "jobs", "decisions"):
        assert sorted(identities(kind, lines[kind])) == sorted(old[kind]), kind
    assert len(lines["gaps"]) == 2 and {line["state"] for line in lines["gaps"]} == {"given_up"}
    # Each line is the API's shape of its row.
    first_decision = next(line for line in lines["decisions"] if line["id"] == min(old["decisions"]))
    assert first_decision["evaluated_at"] == iso(now - timedelta(days=500))
    assert {"id", "event_id", "outcome", "gates", "envelope", "dispatched", "job_id"} <= set(first_decision)
    assert set(lines["jobs"][0]) >= {"id", "decision_id", "state", "forge", "failure"}
    assert lines["timeline"][0]["summary"] == "done long ago"

    # Gone from the database, and only those; what is live stays however old.
    assert set(RouterDecision.select(RouterDecision.id).tuples()) == {
        (i,) for i in new["decisions"] | {made["open_decision"]}
    }
    assert {e.id for e in TimelineEntry.select()} >= {made["live_entry"], *new["timeline"]}
    assert not {e.id for e in TimelineEntry.select()} & old["timeline"]
    assert {j.id for j in DispatchJob.select()} == {made["open_job"], *new["jobs"]}
    kept_messages = {m.id for m in OutboxMessage.select()}
    assert {made["pending"], *new["outbox"]} <= kept_messages and not kept_messages & old["outbox"]
    assert ReconciliationGap.select().where(ReconciliationGap.guid == "guid-open").count() == 1
    assert not {r.id for r in AgentRun.select()} & old["runs"]
    assert Account.select().where(Account.name == "ada").count() == 1
    assert RouterPolicyVersion.select().count() == policy_versions
    assert ScorecardEntry.select().count() == scorecard_rows  # the scorecard's entries outlive their decisions

    # The scorecard answers the same over every range; the decisions page lists only what is kept.
    assert scorecards(board, now) == before
    listed = board.get("/api/v1/router/decisions?limit=100").json["decisions"]
    assert {d["id"] for d in listed} == new["decisions"] | {made["open_decision"]}

    # The run is recorded with what moved; a second run moves nothing and leaves the files as they were.
    recorded = board.get("/api/v1/agents/runs?agent_id=archivist").json["runs"][0]
    assert recorded["details"]["moved"] == report.moved
    written = {p.name: p.read_bytes() for p in (config.data_dir / "archive").glob("*.jsonl.gz")}
    again = archivist(config, clock).run(Trigger("command"))
    assert again.moved == dict.fromkeys(KINDS, 0)
    assert {p.name: p.read_bytes() for p in (config.data_dir / "archive").glob("*.jsonl.gz")} == written
    assert scorecards(board, now) == before

    # Something recorded at an archived time (an import of older history) never has the archived days counted again
    # from the entries that are gone.
    with transaction():
        scorecard.forget_days_from(now - timedelta(days=500))
    scorecard.keep_settled_days(now=now)
    assert scorecards(board, now) == before


@pytest.mark.both_backends
def test_a_crash_between_the_write_and_the_delete_loses_nothing_and_doubles_nothing(board, config, clock):
    made = seed(clock())
    old = made["old"]

    def crash(kind: str) -> None:
        if kind == "decisions":
            raise RuntimeError("killed between the write and the delete")

    with pytest.raises(RuntimeError):
        archivist(config, clock, written=crash).run(Trigger("command"))
    # The decisions' files are written, their rows still there.
    assert RouterDecision.select().where(RouterDecision.id.in_(sorted(old["decisions"]))).count() == 6
    assert len(archive_lines(config.data_dir / "archive")["decisions"]) == 6

    # A newer old decision arrives meanwhile in an archived month: it joins the month's file as a second member.
    late = decision(clock() - timedelta(days=499))
    decision(clock())  # a newer one: the newest row of a table stays
    report = archivist(config, clock).run(Trigger("command"))
    assert report.moved["decisions"] == 7

    lines = archive_lines(config.data_dir / "archive")
    for kind in ("timeline", "runs", "outbox", "jobs", "decisions"):
        ids = identities(kind, lines[kind])
        assert len(ids) == len(set(ids)), f"{kind} written twice"
    assert sorted(identities("decisions", lines["decisions"])) == sorted(old["decisions"] | {late})
    assert RouterDecision.select().where(RouterDecision.id.in_(sorted(old["decisions"] | {late}))).count() == 0
    assert not list((config.data_dir / "archive").glob("*.partial"))
    # Two gzip members in a row: zcat reads them as one stream, as Python's gzip does.
    month = (clock() - timedelta(days=500)).strftime("%Y-%m")
    path = config.data_dir / "archive" / f"decisions-{month}.jsonl.gz"
    assert gzip.decompress(path.read_bytes()).count(b"\n") == 4
    zcat = subprocess.run(["zcat", str(path)], capture_output=True, check=True).stdout
    assert zcat == gzip.decompress(path.read_bytes())


@pytest.mark.both_backends
def test_a_backtest_over_an_archived_range_says_how_many_decisions_it_could_not_read(board, config, clock):
    now = clock()
    made = seed(now)
    first = now - timedelta(days=500)
    archivist(config, clock).run(Trigger("command"))

    def backtest(body: dict) -> dict:
        answer = board.post("/api/v1/router/backtest", json=body)
        assert answer.status_code == 200, answer.text
        return answer.json

    assert backtest({})["archived"] == 6
    one_month = backtest({"since": iso(midnight(first)), "until": iso(midnight(first) + timedelta(days=2))})
    assert (one_month["archived"], one_month["evaluated"]) == (3, 0)
    # The decision of the open job stays, and is read.
    other_month = backtest(
        {"since": iso(midnight(first) + timedelta(days=30)), "until": iso(now - timedelta(days=400))}
    )
    assert (other_month["archived"], other_month["evaluated"]) == (3, 1)
    recent = backtest({"since": iso(now - timedelta(days=20))})
    assert (recent["archived"], recent["evaluated"]) == (0, len(made["new"]["decisions"]))


@pytest.mark.both_backends
def test_the_cutoff_is_keep_days_before_now_or_the_one_given(board, config_factory, clock):
    now = clock()
    older, newer = decision(now - timedelta(days=40)), decision(now - timedelta(days=20))
    short = config_factory(keep_days=30)
    assert archivist(short, clock).run(Trigger("command")).moved["decisions"] == 1
    assert {d.id for d in RouterDecision.select()} == {newer}
    assert older not in {d.id for d in RouterDecision.select()}
    # The newest decision stays whatever its age (its id would be handed out again); it leaves once a newer one is in.
    assert archivist(short, clock).run(Trigger("command"), before=now).moved["decisions"] == 0
    latest = decision(now - timedelta(days=5))
    report = archivist(short, clock).run(Trigger("command"), before=now - timedelta(days=10))
    assert report.moved["decisions"] == 1 and report.before == now - timedelta(days=10)

    # Up to now: a judged decision stays until the scorecard has counted its day; any other goes.
    judged = decision(now - timedelta(hours=2))
    with transaction():
        unjudged = decisions.record(
            evaluated_at=now - timedelta(hours=1), mode="shadow", dispatched=False, outcome="no_action", gates=[]
        ).id
        newest = decisions.record(
            evaluated_at=now - timedelta(minutes=30), mode="shadow", dispatched=False, outcome="no_action", gates=[]
        ).id
    card = board.get("/api/v1/router/scorecard").json
    report = archivist(short, clock).run(Trigger("command"), before=now)
    assert report.moved["decisions"] == 2  # latest (its day counted) and the unjudged one
    assert {d.id for d in RouterDecision.select()} == {judged, newest}
    assert board.get("/api/v1/router/scorecard").json == card
    assert decision(now) > max(older, newer, latest, judged, unjudged, newest)  # no id handed out twice


def test_on_sqlite_the_space_the_rows_held_is_reused(board, config, clock):
    """SQLite keeps a deleted row's pages on its free list and fills them before it grows the file: no VACUUM needed.
    (PostgreSQL reuses dead rows' space after its autovacuum: nothing of ours to show there.)"""
    if is_postgres():
        pytest.skip("SQLite's free pages; PostgreSQL's autovacuum is its own")
    now = clock()
    big = {"text": "x" * 2000}

    def many(at: datetime) -> None:
        with transaction():
            for n in range(300):
                decisions.record(
                    evaluated_at=at + timedelta(seconds=n),
                    mode="shadow",
                    dispatched=False,
                    outcome="no_action",
                    gates=[],
                    envelope=big,
                )

    def pages() -> tuple[int, int]:
        with connection():
            from storage.db import db

            return (
                db.execute_sql("PRAGMA page_count").fetchone()[0],
                db.execute_sql("PRAGMA freelist_count").fetchone()[0],
            )

    assert sqlite_path() is not None
    many(now - timedelta(days=500))
    decision(now)  # a newer one: the newest row of a table stays
    grown, _ = pages()
    assert archivist(config, clock).run(Trigger("command")).moved["decisions"] == 300
    after, free = pages()
    assert free > 100  # the rows' pages are free, kept in the file for what comes next
    many(now - timedelta(days=5))
    again, _ = pages()
    assert again - after < (grown - after) // 4 + 20, (grown, after, again)


def test_the_archivist_is_on_the_agents_strip_and_in_metrics_and_scheduled_in_the_jobs_process(board, config, clock):
    assert "archivist" in assembly.scheduled_jobs(config, clock)
    tiles = {a["agent_id"]: a for a in board.get("/api/v1/agents").json["agents"]}
    assert tiles["archivist"]["schedule"] == "30 3 * * *"
    archivist(config, clock).run(Trigger("schedule"))
    tiles = {a["agent_id"]: a for a in board.get("/api/v1/agents").json["agents"]}
    assert tiles["archivist"]["last_status"] == "ARCHIVED"
    metrics = board.get("/metrics").text
    assert 'svc_agent_runs_total{agent_id="archivist",status="ok"} 1.0' in metrics


# Ranges the other test does not ask: ends inside an archived day, windows other than a day. The scorecard's entries
# outlive their decisions (schema version 13), so these answer the same too.
UNEVEN_RANGES = {
    "ends inside an archived day": lambda first: (
        f"since={iso(first - timedelta(hours=1))}&until={iso(first + timedelta(hours=4))}"
    ),
    "a week's window": lambda first: "window_seconds=604800",
    "an hour's window": lambda first: (
        f"since={iso(midnight(first))}&until={iso(midnight(first) + timedelta(days=40))}&window_seconds=3600"
    ),
}


@pytest.mark.both_backends
@pytest.mark.parametrize("name", sorted(UNEVEN_RANGES))
def test_the_scorecard_over_an_uneven_range_or_another_window_is_the_same_after_an_archive_run(
    board, config, clock, name
):
    now = clock()
    made = seed(now)
    query = UNEVEN_RANGES[name](now - timedelta(days=500))  # three judged decisions then, +2 h and +3 h

    def answer() -> dict:
        got = board.get(f"/api/v1/router/scorecard?{query}")
        assert got.status_code == 200, got.text
        return {"rules": got.json["rules"], "gates": got.json["gates"]}

    before = answer()
    assert before["rules"]["coder"]["agreement"]["settled"] >= 3
    report = archivist(config, clock).run(Trigger("command"))
    assert report.moved["decisions"] == len(made["old"]["decisions"])  # the decisions of then did leave
    assert answer() == before
