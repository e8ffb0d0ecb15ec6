"""examples/history: the generated history is what its generator makes and every line a valid envelope; the export
script turns GitHub's and GitLab's REST list items (the sample exports beside it) into the envelopes the webhooks'
own normalizers make, in the order they occurred, and leaves out nothing it can read. Run in this process."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from collections import Counter
from datetime import UTC, datetime

import pytest

from contracts import conforms
from contracts.envelope import ENVELOPE
from domain.clock import parse_timestamp

from events_kit import EXAMPLES

HISTORY = EXAMPLES / "history"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"history_{name}", HISTORY / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_history_is_its_generators_output_and_every_line_is_valid():
    generate = load("generate")
    made = list(generate.history(days=14, per_day=3, start=datetime(2026, 10, 5, tzinfo=UTC), seed=7))
    lines = (HISTORY / "history.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == made
    assert all(conforms(ENVELOPE, document) for document in made)
    assert len({d["id"] for d in made}) == len(made)
    moments = [parse_timestamp(d["occurred_at"]) for d in made]
    assert moments == sorted(moments)
    kinds = Counter(d["transition"]["kind"] for d in made)
    assert kinds["state_changed"] == 42 and kinds["opened"] > 0 and kinds["pipeline_failed"] > 0


@pytest.fixture
def export(monkeypatch, capsys):
    """`from_forge_export.py ARGS...` in this process: (the envelopes it wrote, what it said on standard error)."""
    module = load("from_forge_export")

    def run(*args: str) -> tuple[list[dict], str]:
        monkeypatch.setattr(sys, "argv", ["from_forge_export.py", *args])
        monkeypatch.setattr(sys, "stdout", io.StringIO())
        assert module.main() == 0
        written = sys.stdout.getvalue()
        return [json.loads(line) for line in written.splitlines()], capsys.readouterr().err

    return run


def test_github_pull_requests_and_runs_become_the_webhooks_envelopes(export):
    made, said = export(
        "--github-pulls",
        str(HISTORY / "github" / "pulls.json"),
        "--github-runs",
        str(HISTORY / "github" / "runs.json"),
        "--prefixes",
        "PORT",
    )
    assert said == ""
    assert all(conforms(ENVELOPE, d) for d in made)
    moments = [parse_timestamp(d["occurred_at"]) for d in made]
    assert moments == sorted(moments)
    about = [(d["transition"]["kind"], d["subject"]["id"]) for d in made if d["subject"]["id"] == "PORT-11"]
    assert about == [
        ("opened", "PORT-11"),
        ("pipeline_started", "PORT-11"),
        ("pipeline_failed", "PORT-11"),
        ("pipeline_started", "PORT-11"),
        ("pipeline_passed", "PORT-11"),
        ("merged", "PORT-11"),
        ("pipeline_started", "PORT-11"),  # the run on main after the merge, named by its title
    ]
    by_id = {d["id"]: d for d in made}
    opened = by_id["github:export:acme/portfolio#41:opened"]
    assert opened["occurred_at"] == "2026-10-06T09:12:40.000000Z" and opened["actor"] == {
        "kind": "human",
        "id": "github:mona",
        "roles": [],
    }
    assert "head_sha" not in opened["forge"]  # the list knows only the last head
    merged = by_id["github:export:acme/portfolio#41:merged"]
    assert merged["forge"]["merge_commit_sha"] == "8e2d1c0b9a8f7e6d5c4b3a29180f7e6d5c4b3a21"
    failed = by_id["github:export:acme/portfolio:run-9100000001.1:completed"]
    assert failed["dispatch_hints"]["suggested_role"] == "fixer" and failed["forge"]["pr_number"] == 41
    closed = by_id["github:export:acme/portfolio#42:closed"]
    assert closed["transition"] == {"kind": "closed", "from": "open", "to": "closed"}
    assert closed["actor"]["kind"] == "agent"
    # A branch and title with no known ticket key: the pull request is the subject, as for its webhook.
    assert by_id["github:export:acme/portfolio#43:opened"]["subject"] == {
        "type": "pull_request",
        "id": "acme/portfolio#43",
        "repo": "acme/portfolio",
    }
    assert len(made) == 12


def test_gitlab_merge_requests_and_pipelines_become_the_webhooks_envelopes(export):
    made, said = export(
        "--gitlab-merge-requests",
        str(HISTORY / "gitlab" / "merge_requests.json"),
        "--gitlab-pipelines",
        str(HISTORY / "gitlab" / "pipelines.json"),
        "--gitlab-project",
        "acme/portfolio",
        "--prefixes",
        "PORT",
    )
    assert said == ""
    assert all(conforms(ENVELOPE, d) for d in made)
    kinds = [(d["transition"]["kind"], d["subject"]["id"]) for d in made]
    assert kinds == [
        ("opened", "PORT-21"),
        ("pipeline_started", "PORT-21"),
        ("pipeline_failed", "PORT-21"),
        ("pipeline_started", "PORT-21"),
        ("pipeline_passed", "PORT-21"),
        ("merged", "PORT-21"),
        ("opened", "PORT-22"),
        ("pipeline_started", "PORT-22"),
    ]
    failed = made[2]
    # A merge request pipeline runs on refs/merge-requests/7/head: its merge request gives the branch and number.
    assert failed["forge"]["branch"] == "port-21-export" and failed["forge"]["pr_number"] == 7
    assert made[6]["actor"] == {"kind": "agent", "id": "gitlab:project_15_bot_4f1c2a", "roles": []}


def test_an_item_the_normalizers_refuse_is_left_out_and_said(export, tmp_path):
    pulls = json.loads((HISTORY / "github" / "pulls.json").read_text())
    broken = dict(pulls[0], number=99, head={"ref": None})
    (tmp_path / "pulls.json").write_text(json.dumps([broken]) + json.dumps(pulls[:1]))  # two pages
    made, said = export("--github-pulls", str(tmp_path / "pulls.json"), "--prefixes", "PORT")
    assert [d["transition"]["kind"] for d in made] == ["opened", "merged"]
    assert said.startswith("from_forge_export: left out an item: ")


def test_the_same_export_gives_the_same_ids_so_a_second_import_is_all_duplicates(export):
    made, _ = export("--github-pulls", str(HISTORY / "github" / "pulls.json"), "--prefixes", "PORT")
    again, _ = export("--github-pulls", str(HISTORY / "github" / "pulls.json"), "--prefixes", "PORT")
    assert made == again and len({d["id"] for d in made}) == len(made)
