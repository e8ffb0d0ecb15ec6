"""`svc policy show|set|history`: the router's policy from the command line, in the database the service uses. A
policy file that cannot be read, parsed or used is one line saying what is wrong (exit 2), and nothing is stored."""

from __future__ import annotations

import copy
import json

import pytest

from domain.policy.document import FIRST_RULES
from svc.cli import main

from events_kit import ALLOWLIST
from router_kit import allowlisted


@pytest.fixture
def api(app_factory, config_factory):
    return allowlisted(app_factory, config_factory)


def svc(capsys, monkeypatch, config, *args):
    monkeypatch.setenv("DATABASE_URL", config.database_url)
    monkeypatch.setenv("SVC_DATA_DIR", str(config.data_dir))
    code = main(["policy", *args])
    out, err = capsys.readouterr()
    return code, out, err


def whole(**changes) -> dict:
    return {
        "allowlist": sorted(ALLOWLIST),
        "retry_budget": 2,
        "fleet_size": 1,
        "rules": copy.deepcopy(list(FIRST_RULES)),
        **changes,
    }


def test_show_says_the_policy_in_force_with_its_rules_in_words(api, config, capsys, monkeypatch):
    code, out, _ = svc(capsys, monkeypatch, config, "show")
    in_force = api.get("/api/v1/router/policy").json
    assert code == 0
    assert out.startswith(f"policy {in_force['version']}, set by svc at ")
    assert "retry budget 2; fleet size 1" in out
    assert (
        f"  2. coder (coder, shadow, version {in_force['rule_versions']['coder']}): transition kind is state_changed, "
        "to is execute, actor kind is not untrusted_comment, eligible for a worker is true"
    ) in out
    code, out, _ = svc(capsys, monkeypatch, config, "show", "--format", "json")
    assert code == 0 and json.loads(out) == in_force


def test_set_stores_a_new_version_from_a_file_and_history_lists_them(api, config, capsys, monkeypatch, tmp_path):
    before = api.get("/api/v1/router/policy").json
    policy = tmp_path / "policy.json"
    rules = [{"name": "fixer", "role": "fixer", "when": {"transition.kind": "pipeline_failed"}}]
    policy.write_text(json.dumps(whole(rules=rules, retry_budget=3)))
    code, out, err = svc(capsys, monkeypatch, config, "set", str(policy), "--reason", "the fixer alone")
    assert code == 0, err
    after = api.get("/api/v1/router/policy").json
    assert after["version"] != before["version"] and f"version {after['version']} is in force" in out
    assert after["reason"] == "the fixer alone" and after["set_by"].endswith("via svc policy")
    assert after["policy"]["rules"] == [{**rules[0], "mode": "shadow"}] and after["policy"]["retry_budget"] == 3
    # The same document again stores nothing; forcing is recorded with its reason.
    code, out, _ = svc(capsys, monkeypatch, config, "set", str(policy), "--reason", "again")
    assert code == 0 and "is this one already; nothing stored" in out
    policy.write_text(json.dumps(whole(rules=[{**rules[0], "mode": "live"}])))
    assert svc(capsys, monkeypatch, config, "set", str(policy), "--reason", "live", "--force", "trust it")[0] == 0
    assert api.get("/api/v1/router/policy").json["force"] == "trust it"
    code, out, _ = svc(capsys, monkeypatch, config, "history")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3
    assert "in force" in lines[0] and "forced: trust it" in lines[0]
    assert lines[1].endswith("the fixer alone") and lines[2].startswith(before["version"])


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot read"),
        ("{", "is not JSON"),
        (json.dumps({"allowlist": []}), "is not a whole router policy (3 violation(s)): /fleet_size: is required"),
        (
            json.dumps(
                whole(
                    rules=[
                        {"name": "a", "role": None, "when": {}},
                        {"name": "a", "role": None, "when": {"transition.knd": 1}},
                    ]
                )
            ),
            "/rules/1/name: 'a' is already the name of item 0; /rules/1/when/transition.knd: is not a known field",
        ),
        (
            json.dumps(whole(rules=[{"name": f"r{n}", "role": None, "when": {}} for n in range(101)])),
            "/rules: has 101 items; at most 100 allowed",
        ),
    ],
)
def test_a_file_that_cannot_be_used_is_one_line_and_nothing_is_stored(
    api, config, capsys, monkeypatch, tmp_path, content, says
):
    before = api.get("/api/v1/router/policy/history").json
    policy = tmp_path / "policy.json"
    if content is not None:
        policy.write_text(content)
    code, out, err = svc(capsys, monkeypatch, config, "set", str(policy), "--reason", "try")
    assert code == 2 and out == ""
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert api.get("/api/v1/router/policy/history").json == before


def test_set_without_a_reason_is_refused(api, config, capsys, monkeypatch, tmp_path):
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(whole()))
    with pytest.raises(SystemExit) as refused:
        svc(capsys, monkeypatch, config, "set", str(policy))
    assert refused.value.code == 2 and "--reason" in capsys.readouterr().err
    assert svc(capsys, monkeypatch, config, "set", str(policy), "--reason", "  ")[0] == 2


def test_show_on_a_database_without_a_policy_says_how_one_comes(config, capsys, monkeypatch):
    code, _, err = svc(capsys, monkeypatch, config, "show")
    assert code == 1 and "no policy is stored in this database yet" in err


def test_set_refuses_a_rule_made_live_without_evidence_with_its_numbers(api, config, capsys, monkeypatch, tmp_path):
    before = api.get("/api/v1/router/policy").json
    rules = copy.deepcopy(list(FIRST_RULES))
    rules[1]["mode"] = "live"  # the coder, with no decisions behind it
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(whole(rules=rules)))
    code, out, err = svc(capsys, monkeypatch, config, "set", str(policy), "--reason", "coder live")
    assert code == 1 and out == ""
    assert err.startswith("svc policy set: refused, nothing stored: ")
    assert "  coder: 0 settled (needs 20), agreement low end none (needs 0.80)\n" in err
    assert "--force REASON" in err
    assert api.get("/api/v1/router/policy").json["version"] == before["version"]
    code, out, err = svc(
        capsys, monkeypatch, config, "set", str(policy), "--reason", "coder live", "--force", "watched"
    )
    assert code == 0, err
    assert api.get("/api/v1/router/policy").json["forced"] is True
