"""The envelope contract: every example in examples/ through `svc validate`, the fast validator against the
reference one, and the worker output gate."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import contracts
from contracts import conforms
from contracts.envelope import ENVELOPE, WORKER_OUTPUT, check_worker_output, envelope_violations
from svc.cli import main

from events_kit import EXAMPLES

VALID = sorted((EXAMPLES / "envelopes" / "valid").glob("*.json")) + sorted(
    (EXAMPLES / "envelopes" / "mapping").glob("*.json")
)
INVALID = sorted((EXAMPLES / "envelopes" / "invalid").glob("*.json"))
EXPECTED = json.loads((EXAMPLES / "invalid-envelopes.expected.json").read_text())
KINDS = contracts.load(ENVELOPE)["$defs"]["kind"]["enum"]
SVC = Path(sys.executable).with_name("svc")


def test_there_is_one_valid_example_per_transition_kind_and_four_mapping_examples():
    assert sorted(p.stem for p in (EXAMPLES / "envelopes" / "valid").glob("*.json")) == sorted(KINDS)
    for path in (EXAMPLES / "envelopes" / "valid").glob("*.json"):
        assert json.loads(path.read_text())["transition"]["kind"] == path.stem
    assert len(list((EXAMPLES / "envelopes" / "mapping").glob("*.json"))) == 4
    assert sorted(p.name for p in INVALID) == sorted(EXPECTED)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_svc_validate_passes_every_valid_example(path, capsys):
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok (1 document)\n"


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_svc_validate_fails_every_invalid_example_naming_each_violation(path, capsys):
    assert main(["validate", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    named = sorted({line.split(": ")[1] for line in lines})
    assert named == sorted(EXPECTED[path.name])
    assert all(line.startswith(f"{path}: /") for line in lines)


@pytest.mark.skipif(not SVC.exists(), reason="the svc command is not installed next to this interpreter")
def test_the_svc_command_validates_the_examples_folder():
    envelopes = EXAMPLES / "envelopes"
    good = subprocess.run([SVC, "validate", *map(str, VALID)], capture_output=True, text=True, check=False)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = subprocess.run([SVC, "validate", *map(str, INVALID)], capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert len(bad.stdout.splitlines()) >= len(INVALID)
    both = subprocess.run(
        [SVC, "validate", *map(str, sorted(envelopes.rglob("*.json")))], capture_output=True, check=False
    )
    assert both.returncode == 1


def test_svc_validate_reads_batches_and_json_lines(tmp_path, capsys):
    good = json.loads(VALID[0].read_text())
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps({"events": [good, {**good, "source": "elsewhere"}]}))
    lines = tmp_path / "history.jsonl"
    lines.write_text(json.dumps(good) + "\n\n" + "{not json\n")
    assert main(["validate", str(batch), str(lines)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"{batch}#1: /source: ") for line in out)
    assert any(line.startswith(f"{lines}:3: /: not JSON") for line in out)
    assert not any(f"{batch}#0" in line or f"{lines}:1" in line for line in out)


def test_svc_validate_refuses_a_missing_file(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope.json")]) == 1
    assert "cannot be read" in capsys.readouterr().out


def every_example_document():
    for path in sorted(EXAMPLES.rglob("*.json")):
        document = json.loads(path.read_text())
        if isinstance(document, dict) and "events" in document:
            yield from ((path, d) for d in document["events"])
        else:
            yield path, document


def test_the_fast_validator_agrees_with_the_reference_on_every_example():
    reference = contracts.validator(ENVELOPE)
    checked = 0
    for path, document in every_example_document():
        assert conforms(ENVELOPE, document) == reference.is_valid(document), path
        checked += 1
    # and on hand-made corner cases of the cross-field rules
    base = json.loads((EXAMPLES / "envelopes/mapping/3-ci-pipeline-failed-fixer.json").read_text())
    corners = [
        {**base, "actor": {"kind": "unknown", "id": None}},
        {**base, "actor": {"kind": "human"}},
        {**base, "actor": {"kind": "human", "id": ""}},
        {**base, "actor": {"kind": "human", "id": "a", "roles": ["pm", "pm"]}},
        {**base, "occurred_at": "2026-02-30T10:00:00Z"},
        {**base, "forge": {**base["forge"], "pipeline_status": None}},
        {**base, "dispatch_hints": {"eligible_for_worker": True, "blocked_reason": None}},
        {**base, "dispatch_hints": {"eligible_for_worker": True, "blocked_reason": "await_ci"}},
        {**base, "subject": {"type": "pipeline", "id": "acme/portfolio:8201"}},
        {**base, "transition": {"kind": "pipeline_failed"}},
        {**base, "id": "has space"},
        [],
        "x",
        None,
    ]
    for document in corners:
        assert conforms(ENVELOPE, document) == reference.is_valid(document), document
    assert checked > 40


def test_actor_id_may_be_absent_or_null_and_roles_default_to_empty():
    base = json.loads((EXAMPLES / "envelopes/mapping/1-tracker-state-changed-queued-to-execute.json").read_text())
    for actor in ({"kind": "unknown"}, {"kind": "unknown", "id": None}):
        document = {**base, "actor": actor}
        assert envelope_violations(document) == []
        assert document["actor"] == actor  # validation never fills defaults into the document


def test_the_envelope_schema_is_self_contained_so_it_can_be_published_alone():
    refs = []

    def walk(node):
        if isinstance(node, dict):
            refs.extend(v for k, v in node.items() if k == "$ref")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(contracts.load(ENVELOPE))
    assert refs
    assert [ref for ref in refs if not str(ref).startswith("#/$defs/")] == []


WORKER_OK = {
    "schema": "svc.worker-output/v0",
    "event_id": "gitlab:2d8a6f3e-4b5c-4d6e-8f9a-1b2c3d4e5f60",
    "ticket": "PORT-12",
    "role": "fixer",
    "status": "changes_ready",
    "summary": "Fix the flaky login test",
    "branch": "port-12-login-email",
    "commits": [{"sha": "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", "message": "Wait for the form before typing"}],
    "files_changed": ["tests/test_login.py"],
    "pull_request": {"title": "PORT-12: fix flaky login test", "body": "Waits for the form.", "draft": True},
}


def test_worker_output_that_conforms_may_be_written(tmp_path, capsys):
    assert check_worker_output(WORKER_OK) is WORKER_OK
    path = tmp_path / "out.json"
    path.write_text(json.dumps(WORKER_OK))
    assert main(["validate", "--worker-output", str(path)]) == 0


@pytest.mark.parametrize(
    ("change", "paths"),
    [
        ({"commits": []}, ["/commits"]),
        ({"files_changed": ["../etc/passwd"]}, ["/files_changed/0"]),
        ({"status": "no_changes"}, ["/commits", "/pull_request"]),
        ({"ticket": "port-12", "role": "deployer"}, ["/role", "/ticket"]),
        ({"summary": ""}, ["/summary"]),
    ],
)
def test_worker_output_that_breaks_the_contract_writes_nothing(tmp_path, capsys, change, paths):
    document = {**WORKER_OK, **change}
    with pytest.raises(contracts.ContractViolation) as caught:
        check_worker_output(document)
    assert sorted({v.path for v in caught.value.violations}) == paths
    path = tmp_path / "out.json"
    path.write_text(json.dumps(document))
    assert main(["validate", "--worker-output", str(path)]) == 1
    assert conforms(WORKER_OUTPUT, document) is False
