"""`svc import FILE.jsonl`, run in this process (`svc.cli.main`) against the database an app in the same test reads
through the API: its counts, duplicates and rejected lines, that it never acts (no job, no ticket move, no timeline
entry, no outbox row), and what the scorecard and `GET router/decisions` learn from it (CONTRACT.md, "History: a
year of it, flat", Import). tests/end_to_end/test_import_processes.py imports while `svc serve` answers."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from dispatch_kit import policy, set_policy

from domain.clock import iso
from storage.db import connection
from svc.cli import main

from conftest import BASIC, CI_SECRET
from events_kit import ALLOWLIST, seed_board
from fakes import FakeClock
from router_kit import STRANGER, envelope, route
from testclient import ApiClient

MONA = "github:mona"


@pytest.fixture
def clock() -> FakeClock:
    # The import evaluates at the event's own time, never later than the real clock: the board's clock is the real
    # one (to the second) here, and every event happens before it.
    return FakeClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def api(app_factory, config_factory):
    api = ApiClient(app_factory(config_factory(router_allowlist=ALLOWLIST)), basic=BASIC, ci_secret=CI_SECRET)
    seed_board(api, tickets={f"PORT-{i}": "queued" for i in range(1, 7)})
    return api


@pytest.fixture
def svc_import(monkeypatch, capsys, tmp_path, database_url):
    """`svc import` of the given lines (or of standard input: `stdin=`) in this process: (exit code, standard output,
    standard error)."""
    from storage import db as storage_db

    monkeypatch.setenv("SVC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("SVC_CI_WEBHOOK_SECRET", CI_SECRET)
    monkeypatch.setenv("SVC_ROUTER_ALLOWLIST", ",".join(sorted(ALLOWLIST)))
    files = iter(range(1_000))

    def run(lines: list[Any], *, stdin: bool = False) -> tuple[int, str, str]:
        text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
        if stdin:
            monkeypatch.setattr("sys.stdin", io.StringIO(text))
            name = "-"
        else:
            path = tmp_path / f"history-{next(files)}.jsonl"
            path.write_text(text)
            name = str(path)
        try:
            code = main(["import", name])
        finally:
            # As the command's process would at its exit: its SQLite writer stops, its connections close.
            database = storage_db.db.obj
            storage_db.bind(database)
            database.close_all()
        out, err = capsys.readouterr()
        return code, out, err

    return run


def decisions(api) -> list[dict[str, Any]]:
    answer = api.get("/api/v1/router/decisions?limit=200")
    assert answer.status_code == 200, answer.text
    return answer.json["decisions"]


def at(when: datetime, document: dict[str, Any]) -> dict[str, Any]:
    document["occurred_at"] = iso(when)
    return document


@pytest.mark.both_backends
def test_counts_duplicates_and_rejected_lines_by_number(api, clock, svc_import):
    start = clock() - timedelta(days=2)
    good = [at(start + timedelta(minutes=n), envelope("state_changed", f"PORT-{n}")) for n in range(1, 5)]
    broken = {**good[0], "id": "import:broken", "source": "elsewhere"}
    lines = [good[0], good[1], "", "{not json", good[2], broken, "   ", good[3], good[1]]
    code, out, err = svc_import(lines)
    assert (code, out) == (1, "imported 4, duplicates 1, rejected 2\n")
    said = err.splitlines()
    assert said[0].startswith("svc import: line 4: /: not JSON")
    assert said[1].startswith("svc import: line 6: /source: ")
    assert len(said) == 2
    recorded = decisions(api)
    assert sorted(d["event_id"] for d in recorded) == sorted(e["id"] for e in good)
    # The same file again: everything is a duplicate, nothing is recorded twice.
    code, out, _ = svc_import(lines)
    assert (code, out) == (1, "imported 0, duplicates 5, rejected 2\n")
    assert len(decisions(api)) == 4
    # A clean file exits 0; standard input is read as a file.
    more = at(start, envelope("state_changed", "PORT-5"))
    assert svc_import([more, good[0]], stdin=True)[:2] == (0, "imported 1, duplicates 1, rejected 0\n")


def test_a_line_nested_too_deep_or_from_before_1970_is_rejected_and_the_rest_go_in(api, clock, svc_import):
    start = clock() - timedelta(days=1)
    good = [at(start + timedelta(minutes=n), envelope("state_changed", f"PORT-{n}")) for n in range(1, 3)]
    ancient = at(datetime(1, 1, 1, tzinfo=UTC), envelope("state_changed", "PORT-9"))
    ancient["id"] = "import:ancient"
    code, out, err = svc_import([good[0], "[" * 100_000, ancient, good[1]])
    assert (code, out) == (1, "imported 2, duplicates 0, rejected 2\n")
    assert err.splitlines() == [
        "svc import: line 2: /: not JSON: nested too deep",
        "svc import: line 3: /occurred_at: before 1970-01-01: no history to import is that old",
    ]
    assert sorted(d["event_id"] for d in decisions(api)) == sorted(e["id"] for e in good)


def test_a_file_that_cannot_be_read_is_exit_2(svc_import, tmp_path, capsys):
    assert main(["import", str(tmp_path / "missing.jsonl")]) == 2
    assert "svc import: cannot read" in capsys.readouterr().err


@pytest.mark.both_backends
def test_each_decision_is_evaluated_when_its_event_occurred(api, clock, svc_import):
    long_ago = clock() - timedelta(days=40)
    old = at(long_ago, envelope("state_changed", "PORT-1"))
    future = at(clock() + timedelta(days=3), envelope("state_changed", "PORT-2"))
    assert svc_import([old, future])[0] == 0
    by_id = {d["event_id"]: d for d in decisions(api)}
    imported = by_id[old["id"]]
    assert imported["evaluated_at"] == iso(long_ago)
    # Fresh at its own time, so the rule would have dispatched then: the evidence the scorecard needs.
    assert imported["outcome"] == "would_dispatch"
    assert next(g for g in imported["gates"] if g["gate"] == "fresh")["passed"] is True
    # An event cannot arrive before it occurs: one from the future is taken as arriving now.
    assert clock() <= datetime.fromisoformat(by_id[future["id"]]["evaluated_at"]) < clock() + timedelta(hours=1)


@pytest.mark.both_backends
def test_an_import_never_acts(api, clock, svc_import):
    from storage.models import DispatchJob, OutboxMessage, TimelineEntry

    set_policy(api, policy(live=("coder", "fixer")))
    with_db = api.get("/api/v1/tickets/PORT-1").json
    with connection():
        before = (TimelineEntry.select().count(), OutboxMessage.select().count())
    then = clock() - timedelta(hours=2)
    pull_request = at(then + timedelta(minutes=5), envelope("opened", "PORT-1", actor=MONA))
    pull_request["forge"]["head_sha"] = "a" * 40
    merged = json.loads(json.dumps(pull_request))
    merged.update(id="import:merged", transition={"kind": "merged", "from": "open", "to": "merged"})
    merged["occurred_at"] = iso(then + timedelta(minutes=30))
    failed = at(then + timedelta(minutes=10), envelope("pipeline_failed", "PORT-1", actor="github:github-actions"))
    code, out, _ = svc_import([at(then, envelope("state_changed", "PORT-1", actor=MONA)), pull_request, failed, merged])
    assert (code, out) == (0, "imported 4, duplicates 0, rejected 0\n")
    recorded = decisions(api)
    assert {d["outcome"] for d in recorded if d["rule"] == "coder"} == {"would_dispatch"}
    assert all(d["dispatched"] is False and d["job_id"] is None for d in recorded)
    assert api.get("/api/v1/dispatch/jobs").json["jobs"] == []
    with connection():
        assert DispatchJob.select().count() == 0
    ticket = api.get("/api/v1/tickets/PORT-1").json
    assert (ticket["stage"], ticket["updated_at"]) == (with_db["stage"], with_db["updated_at"])
    with connection():
        assert (TimelineEntry.select().count(), OutboxMessage.select().count()) == before


def scorecard(api, since: datetime, until: datetime) -> dict[str, Any]:
    answer = api.get(f"/api/v1/router/scorecard?since={iso(since)}&until={iso(until)}")
    assert answer.status_code == 200, answer.text
    return answer.json


def counts(entry: dict[str, Any]) -> dict[str, int]:
    return {k: v for k, v in entry.items() if k != "agreement"}


def history(start: datetime) -> list[dict[str, Any]]:
    """A week of a team's history: each day a coder decision taken up an hour later (a pull request opened) and one
    never taken up, and a stranger's move (blocked) the team took up anyway; the first day's signal comes before
    its decision in the file."""
    lines = []
    for day in range(7):
        t = start + timedelta(days=day)
        a, b, c = (f"PORT-{1 + (3 * day + i) % 6}" for i in range(3))
        pair = [
            at(t, envelope("state_changed", a, actor=MONA)),
            at(t + timedelta(hours=1), envelope("opened", a, actor=MONA)),
        ]
        lines += reversed(pair) if day == 0 else pair
        lines.append(at(t + timedelta(minutes=1), envelope("state_changed", b, actor=MONA)))
        lines.append(at(t + timedelta(minutes=2), envelope("state_changed", c, actor=STRANGER)))
        lines.append(at(t + timedelta(hours=3), envelope("opened", c, actor=MONA)))
    return lines


@pytest.mark.both_backends
def test_the_scorecard_learns_from_an_import_before_and_after_the_counter(api, clock, svc_import):
    from domain.router.scorecard import keep_settled_days

    start = (clock() - timedelta(days=30)).replace(hour=9, minute=0, second=0)
    # Live history the counter has already kept, up to the day before yesterday.
    clock.advance(days=-20)
    route(api, at(clock(), envelope("state_changed", "PORT-6", actor=MONA)))
    clock.advance(days=20)
    with connection():
        while keep_settled_days(now=clock()):
            pass
    span = (start - timedelta(days=1), clock())
    empty = scorecard(api, *span)
    assert empty["rules"]["coder"]["not_taken_up"] == 1 and empty["rules"]["coder"]["confirmed"] == 0

    assert svc_import(history(start))[:2] == (0, "imported 35, duplicates 0, rejected 0\n")
    learned = scorecard(api, *span)
    assert counts(learned["rules"]["coder"]) == {
        "confirmed": 7,
        "not_taken_up": 8,
        "held": 0,
        "overridden": 7,
        "pending": 0,
    }
    assert learned["gates"]["authorization"]["overridden"] == 7
    # A range of the imported week alone, and the same after the jobs process has counted the days again.
    week = (start, start + timedelta(days=7))
    assert counts(scorecard(api, *week)["rules"]["coder"])["confirmed"] == 7
    with connection():
        while keep_settled_days(now=clock()):
            pass
    assert scorecard(api, *span) == learned
    assert counts(scorecard(api, *week)["rules"]["coder"])["confirmed"] == 7


def test_the_examples_history_imports_cleanly(api, svc_import):
    from events_kit import EXAMPLES

    lines = Path(EXAMPLES / "history" / "history.jsonl").read_text().splitlines()
    code, out, err = svc_import(lines)
    assert (code, err) == (0, "")
    imported = int(out.split()[1].rstrip(","))
    assert imported == len([line for line in lines if line.strip()]) and imported > 0


@pytest.mark.both_backends
def test_events_imported_out_of_order_are_judged_as_if_in_order(api, clock, svc_import):
    """A decision imported after the event that took its work up is taken up by it; an earlier event imported later
    than a later one is when the work was taken up (a five-minute window tells the two apart)."""
    then = (clock() - timedelta(days=10)).replace(microsecond=0)
    decision = at(then, envelope("state_changed", "PORT-1", actor=MONA))
    late = at(then + timedelta(hours=20), envelope("opened", "PORT-1", actor=MONA))
    early = at(then + timedelta(minutes=2), envelope("synchronized", "PORT-1", actor=MONA))
    assert svc_import([late, decision])[0] == 0
    span = f"since={iso(then - timedelta(hours=1))}&until={iso(then + timedelta(days=2))}"

    def coder(window: int) -> dict[str, int]:
        answer = api.get(f"/api/v1/router/scorecard?{span}&window_seconds={window}")
        assert answer.status_code == 200, answer.text
        return counts(answer.json["rules"]["coder"])

    assert (coder(86400)["confirmed"], coder(300)["not_taken_up"]) == (1, 1)
    assert svc_import([early])[0] == 0
    assert (coder(86400)["confirmed"], coder(300)["confirmed"]) == (1, 1)


def test_a_database_it_cannot_use_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    from processes import free_port

    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps(envelope("state_changed", "PORT-1")) + "\n")
    monkeypatch.setenv("SVC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DATABASE_URL", f"postgresql://127.0.0.1:{free_port()}/nowhere")
    assert main(["import", str(history)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("svc import: cannot use the database: ") and len(err.splitlines()) == 1


@pytest.mark.both_backends
def test_an_event_whose_decision_was_archived_is_still_a_duplicate(api, clock, svc_import, capsys):
    """Importing a history again after `svc archive` moved its decisions out skips every line, and the same event
    posted again answers 200, without the decision that is in the archive now."""
    start = datetime.now(UTC) - timedelta(days=500)
    lines = [at(start + timedelta(minutes=n), envelope("state_changed", f"PORT-{n}")) for n in range(1, 5)]
    assert svc_import(lines)[:2] == (0, "imported 4, duplicates 0, rejected 0\n")
    try:
        assert main(["archive", "--before", iso(datetime.now(UTC) - timedelta(days=400))]) == 0
    finally:
        from storage import db as storage_db

        database = storage_db.db.obj
        storage_db.bind(database)
        database.close_all()
    assert "decisions 3\n" in capsys.readouterr().out  # the newest stays (its id is never handed out again)
    assert len(decisions(api)) == 1

    assert svc_import(lines)[:2] == (0, "imported 0, duplicates 4, rejected 0\n")
    again = api.post("/api/v1/events", json=lines[0], headers={"X-Svc-CI-Secret": CI_SECRET})
    assert again.status_code == 200, again.text
    assert again.json == {"event_id": lines[0]["id"], "decision": None}
    assert len(decisions(api)) == 1
