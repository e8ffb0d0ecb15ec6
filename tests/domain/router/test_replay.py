"""`svc replay`: recorded envelopes through the gates offline, one decision per line, a summary; nothing written."""

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from domain.policy.document import Policy
from domain.router.board_view import SnapshotBoardView, TicketState
from domain.router.replay import replay
from svc.cli import main

from events_kit import ALLOWLIST, EXAMPLES, example, seed_board
from testclient import ApiClient

HISTORY = EXAMPLES / "replay" / "history.jsonl"
SNAPSHOT = EXAMPLES / "replay" / "snapshot.json"
SVC = Path(sys.executable).with_name("svc")
ALLOW = ",".join(sorted(ALLOWLIST))


def run_cli(*args, env_extra=None):
    from processes import svc_env

    env = svc_env(SVC_ROUTER_ALLOWLIST=ALLOW, **(env_extra or {}))
    return subprocess.run([SVC, "replay", *args], capture_output=True, text=True, env=env, check=False, timeout=60)


@pytest.mark.skipif(not SVC.exists(), reason="the svc command is not installed next to this interpreter")
def test_replay_against_a_snapshot_prints_one_decision_per_line_and_a_summary(tmp_path):
    result = run_cli(str(HISTORY), "--snapshot", str(SNAPSHOT), env_extra={"SVC_DATA_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["line"] for d in lines] == list(range(1, 10))
    assert [d.get("outcome") for d in lines] == [
        "would_dispatch",  # mapping 1: coder
        "no_action",  # mapping 2: waits for CI
        "would_dispatch",  # mapping 3: fixer
        None,  # a redelivery of line 1
        "no_action",  # mapping 4: the poller
        "would_dispatch",  # the second red pipeline: fixer
        "stuck",  # the third: the retry budget (fixers since the last green pipeline) is spent
        "own",  # the service's own needs_you (from svc, by the system)
        "rejected",
    ]
    assert lines[3] == {"line": 4, "event_id": lines[0]["event_id"], "duplicate_of_line": 1, "dispatched": False}
    assert all(d["dispatched"] is False for d in lines)
    assert "envelope" not in lines[0]
    # Each decision says what its gates applied and read, as a live one records it; a rejected line neither.
    assert lines[0]["policy"]["allowlist"] == sorted(ALLOWLIST) and len(lines[0]["policy"]["version"]) == 12
    assert set(lines[0]["facts"]) == {
        "ticket_stage",
        "initiative_stage",
        "wallet_locked",
        "jobs_running",
        "fixer_dispatches",
        "age_seconds",
    }
    assert lines[2]["facts"]["fixer_dispatches"] == 0 and lines[5]["facts"]["fixer_dispatches"] == 1
    assert (lines[8]["policy"], lines[8]["facts"]) == (None, None)
    assert result.stderr.strip().endswith(
        "replayed 9 line(s): would_dispatch 3, blocked 0, stuck 1, no_action 2, own 1, rejected 1, duplicates 1; "
        f"would dispatch by role: coder 1, fixer 2; against the snapshot {SNAPSHOT}"
    )
    assert not (tmp_path / "svc.sqlite3").exists()  # a snapshot replay never touches a database


@pytest.mark.skipif(not SVC.exists(), reason="the svc command is not installed next to this interpreter")
def test_a_policy_change_can_be_compared_on_the_same_history(tmp_path):
    env = {"SVC_DATA_DIR": str(tmp_path)}
    looser = run_cli(str(HISTORY), "--snapshot", str(SNAPSHOT), "--retry-budget", "3", env_extra=env)
    assert [json.loads(x).get("outcome") for x in looser.stdout.splitlines()][6] == "would_dispatch"
    closed = run_cli(str(HISTORY), "--snapshot", str(SNAPSHOT), "--allowlist", "nobody", env_extra=env)
    assert "would_dispatch 0, blocked 6, stuck 0, no_action 0, own 1" in closed.stderr


def test_a_broken_snapshot_is_refused_naming_the_violation(tmp_path, capsys):
    bad = tmp_path / "snap.json"
    bad.write_text(json.dumps({"schema": "svc.board-snapshot/v0", "tickets": [{"key": "PORT-1", "stage": "limbo"}]}))
    assert main(["replay", str(HISTORY), "--snapshot", str(bad)]) == 2
    assert f"{bad}: /tickets/0/stage:" in capsys.readouterr().err


def test_replay_against_the_live_board_reads_it_and_writes_nothing(
    app_factory, config_factory, database_url, monkeypatch, capsys, tmp_path
):
    api = ApiClient(
        app_factory(config_factory(router_allowlist=ALLOWLIST)),
        basic="admin:correct-horse-battery",
        ci_secret="test-ci-secret-0123456789abcdef",
    )
    seed_board(api, tickets={"PORT-12": "human_test", "PORT-14": "queued"})
    assert api.post("/api/v1/events", json=example("envelopes/mapping/3-ci-pipeline-failed-fixer.json"), auth="ci")
    before = api.get("/api/v1/router/decisions").json["decisions"]
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("SVC_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SVC_ROUTER_ALLOWLIST", ALLOW)
    assert main(["replay", str(HISTORY)]) == 0
    out, err = capsys.readouterr()
    first = json.loads(out.splitlines()[0])
    # PORT-12 sits at a human gate on the live board: the coder of line 1 is blocked there.
    assert first["outcome"] == "blocked"
    assert [g["gate"] for g in first["gates"] if not g["passed"]] == ["human_gate"]
    assert "against the board as it is now" in err
    assert api.get("/api/v1/router/decisions").json["decisions"] == before

    snapshot = tmp_path / "board.json"
    assert main(["replay", "--save-snapshot", str(snapshot)]) == 0
    saved = json.loads(snapshot.read_text())
    assert {t["key"]: t["stage"] for t in saved["tickets"]} == {"PORT-12": "human_test", "PORT-14": "queued"}
    assert list(saved["fixer_dispatches"]) == []  # the live decision was blocked by the human gate too
    capsys.readouterr()
    assert main(["replay", str(HISTORY), "--snapshot", str(snapshot)]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["outcome"] == "blocked"


class Discard:
    def write(self, text):
        return len(text)


def test_replay_streams_with_flat_memory():
    """Eight thousand more lines leave no more live objects behind: the file is streamed, the windows bounded."""
    base = example("envelopes/mapping/3-ci-pipeline-failed-fixer.json")
    blocks = {}

    def envelopes(count):
        for i in range(count):
            if i in (2_000, 10_000 - 1):
                gc.collect()
                blocks[i] = sys.getallocatedblocks()
            yield json.dumps({**base, "id": f"gitlab:{i}", "subject": {"type": "ticket", "id": f"PORT-{i % 50}"}})

    view = SnapshotBoardView(
        tickets={f"PORT-{i}": TicketState(f"PORT-{i}", "ci", "portfolio") for i in range(50)},
        initiatives={"portfolio": "active"},
    )
    summary = replay(envelopes(10_000), view, Policy(frozenset({"gitlab:gitlab-ci"})), Discard(), recent_ids=500)
    assert summary.lines == 10_000
    assert summary.outcomes["would_dispatch"] == 100  # two fixer dispatches for each of 50 tickets
    # Keeping each line (or each decision) would leave at least one block per line: 8,000 more.
    assert blocks[9_999] - blocks[2_000] < 1_000, blocks


def test_replay_without_a_board_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    assert main(["replay", str(HISTORY)]) == 2
    assert "cannot read the board" in capsys.readouterr().err


def test_a_saved_snapshot_knows_how_many_jobs_run(
    app_factory, config_factory, database_url, monkeypatch, capsys, tmp_path
):
    from dispatch_kit import claim, make_job, worker

    api = ApiClient(
        app_factory(config_factory()), basic="admin:correct-horse-battery", ci_secret="test-ci-secret-0123456789abcdef"
    )
    seed_board(api, tickets={"PORT-15": "execute", "PORT-16": "queued"})
    make_job("PORT-15")
    assert claim(worker(api)).status_code == 200
    assert api.post("/api/v1/slots/bay-2/claim", json={"ticket": "PORT-16"}).status_code == 200
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("SVC_DATA_DIR", str(tmp_path))
    snapshot = tmp_path / "board.json"
    assert main(["replay", "--save-snapshot", str(snapshot)]) == 0
    # The fleet counts running jobs: PORT-15's; PORT-16 only holds a bay.
    saved = json.loads(snapshot.read_text())
    assert saved["jobs_running"] == 1 and "fleet_holders" not in saved
