"""What would this policy change do? Each decision records its policy and facts; `svc backtest` and
`POST /api/v1/router/backtest` re-evaluate them under a candidate against the board as it was then."""

import copy
import json

import pytest
from dispatch_kit import claim, make_job, policy, set_policy, worker

from domain.policy.document import FIRST_RULES
from svc.cli import main

from events_kit import ALLOWLIST, seed_board
from router_kit import STRANGER, allowlisted, envelope, route


@pytest.fixture
def api(app_factory, config_factory):
    return allowlisted(app_factory, config_factory)


def backtest(api, **body) -> dict:
    answer = api.post("/api/v1/router/backtest", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json


def test_a_decision_records_the_policy_it_applied_and_the_facts_its_gates_read(api):
    seed_board(api, tickets={"PORT-1": "queued", "PORT-2": "execute"})
    make_job("PORT-2")
    assert claim(worker(api)).status_code == 200  # a job runs: the fleet of one is full
    decision = route(api, envelope("state_changed", "PORT-1"))
    policy = decision["policy"]
    assert policy["allowlist"] == sorted(ALLOWLIST)
    assert (policy["retry_budget"], policy["fleet_size"]) == (2, 1)
    assert len(policy["version"]) == 12
    assert decision["facts"] == {
        "ticket_stage": "queued",
        "initiative_stage": "active",
        "wallet_locked": False,
        "jobs_running": 1,
        "fixer_dispatches": None,  # no fixer rule matched: the retry budget counted nothing
        "age_seconds": 0.0,  # it happened just now
    }
    assert decision["outcome"] == "blocked"  # PORT-2's job runs in the fleet of one
    listed = api.get("/api/v1/router/decisions").json["decisions"][0]
    assert (listed["policy"], listed["facts"]) == (policy, decision["facts"])
    fixer = route(api, envelope("pipeline_failed", "PORT-2", actor="gitlab:gitlab-ci"))
    assert fixer["facts"]["fixer_dispatches"] == 0 and fixer["policy"]["version"] == policy["version"]


def test_the_recorded_policy_flips_nothing_and_an_allowlist_change_flips_what_it_should(api):
    seed_board(api, tickets={"PORT-1": "queued", "PORT-2": "queued"})
    blocked = route(api, envelope("state_changed", "PORT-1", actor=STRANGER))
    dispatched = route(api, envelope("state_changed", "PORT-2"))
    assert (blocked["outcome"], dispatched["outcome"]) == ("blocked", "would_dispatch")

    same = backtest(api)
    assert (same["evaluated"], same["unchanged"], same["flipped"], same["flips"]) == (2, 2, 0, [])
    assert same["policy"]["version"] == blocked["policy"]["version"]

    report = backtest(api, policy={"allowlist": sorted(ALLOWLIST | {STRANGER})})
    assert report["flipped"] == 1 and report["flips_by_gate"]["authorization"] == 1
    assert report["flips"] == [
        {
            "decision_id": blocked["id"],
            "event_id": blocked["event_id"],
            "subject_id": "PORT-1",
            "recorded": "blocked",
            "candidate": "would_dispatch",
            "gates": ["authorization"],
        }
    ]
    assert report["policy"]["version"] != same["policy"]["version"]
    # Nothing was written: the decisions are as they were, and none more.
    assert len(api.get("/api/v1/router/decisions").json["decisions"]) == 2


def red(head: str) -> dict:
    """A failed pipeline on PORT-1's head `head` (a fixer pushed another between two of them)."""
    document = envelope("pipeline_failed", "PORT-1", actor="gitlab:gitlab-ci")
    document["forge"]["head_sha"] = head * 40
    return document


def test_the_retry_budget_counts_the_candidates_own_fixer_dispatches(api, clock):
    seed_board(api, tickets={"PORT-1": "ci"})
    set_policy(api, policy(live=("fixer",)))
    outcomes = []
    for head in "abc":
        outcomes.append(route(api, red(head))["outcome"])
        clock.advance(minutes=10)
    # Two fixer jobs since the last green pipeline spend the budget: the third red head is stuck.
    assert outcomes == ["would_dispatch", "would_dispatch", "stuck"]

    more = backtest(api, policy={"retry_budget": 3})
    assert [(f["recorded"], f["candidate"], f["gates"]) for f in more["flips"]] == [
        ("stuck", "would_dispatch", ["retry_budget"])
    ]
    # With a budget of one, the second is stuck; the third stays stuck, counting the candidate's one dispatch (not
    # the two recorded), so it does not flip.
    fewer = backtest(api, policy={"retry_budget": 1})
    assert [(f["recorded"], f["candidate"]) for f in fewer["flips"]] == [("would_dispatch", "stuck")]
    assert fewer["unchanged"] == 2
    assert backtest(api)["flipped"] == 0


def test_a_larger_fleet_flips_the_decisions_the_fleet_gate_blocked(api):
    seed_board(api, tickets={"PORT-1": "execute", "PORT-2": "queued"})
    make_job("PORT-1")
    assert claim(worker(api)).status_code == 200
    assert route(api, envelope("state_changed", "PORT-2"))["outcome"] == "blocked"
    report = backtest(api, policy={"fleet_size": 2})
    assert report["flips_by_gate"] == {
        "authorization": 0,
        "agreement": 0,
        "budget": 0,
        "fleet": 1,
        "human_gate": 0,
        "retry_budget": 0,
        "fresh": 0,
    }


def rules_with(*extra, after=()) -> list[dict]:
    """The first policy's rules with `extra` before them and `after` them."""
    return [*extra, *copy.deepcopy(list(FIRST_RULES)), *after]


def test_a_candidate_s_rules_flip_decisions_and_each_flip_names_the_rule_before_and_after(api):
    seed_board(api, tickets={"PORT-1": "queued", "PORT-2": "queued", "PORT-3": "ci"})
    coder = route(api, envelope("state_changed", "PORT-1"))
    other = route(api, envelope("state_changed", "PORT-2", to="blocked"))
    fixer = route(api, envelope("pipeline_failed", "PORT-3", actor="gitlab:gitlab-ci"))
    assert [(d["outcome"], d["rule"]) for d in (coder, other, fixer)] == [
        ("would_dispatch", "coder"),
        ("no_action", None),
        ("would_dispatch", "fixer"),
    ]
    # Hold PORT-1 back with a rule of its own, tried first; let every move to blocked call the fixer.
    hold = {"name": "hold_port_1", "role": None, "when": {"subject.id": "PORT-1"}}
    blocked = {"name": "fix_blocked", "role": "fixer", "when": {"transition.to": "blocked"}}
    report = backtest(api, policy={"rules": rules_with(hold, after=[blocked])})
    assert report["flipped"] == 2 and report["unchanged"] == 1
    assert report["flips"] == [
        {
            "decision_id": coder["id"],
            "event_id": coder["event_id"],
            "subject_id": "PORT-1",
            "recorded": "would_dispatch",
            "candidate": "no_action",
            "gates": [],
            "rule": {"recorded": "coder", "candidate": "hold_port_1"},
        },
        {
            "decision_id": other["id"],
            "event_id": other["event_id"],
            "subject_id": "PORT-2",
            "recorded": "no_action",
            "candidate": "would_dispatch",
            "gates": [],
            "rule": {"recorded": None, "candidate": "fix_blocked"},
        },
    ]
    # Each flip under its recorded rule, or the candidate's when none was recorded.
    assert report["flips_by_rule"] == {"coder": 1, "fix_blocked": 1}
    assert [r["name"] for r in report["policy"]["rules"]] == [
        "hold_port_1",
        "wait_for_ci",
        "coder",
        "fixer",
        "fix_blocked",
    ]
    assert report["policy"]["allowlist"] == sorted(ALLOWLIST)  # members left out are the policy in force's


def test_a_candidate_that_dispatches_another_role_flips_though_the_outcome_stays(api):
    seed_board(api, tickets={"PORT-1": "queued"})
    coder = route(api, envelope("state_changed", "PORT-1"))
    fixer_instead = {"name": "fix_it", "role": "fixer", "when": {"transition.to": "execute"}}
    report = backtest(api, policy={"rules": rules_with(fixer_instead)})
    (flip,) = report["flips"]
    assert (flip["decision_id"], flip["recorded"], flip["candidate"]) == (
        coder["id"],
        "would_dispatch",
        "would_dispatch",
    )
    assert flip["rule"] == {"recorded": "coder", "candidate": "fix_it"}


def test_reordering_rules_that_never_match_the_same_event_flips_nothing(api):
    seed_board(api, tickets={"PORT-1": "queued", "PORT-2": "ci"})
    route(api, envelope("state_changed", "PORT-1"))
    route(api, envelope("pipeline_failed", "PORT-2", actor="gitlab:gitlab-ci"))
    reordered = list(reversed(copy.deepcopy(list(FIRST_RULES))))
    report = backtest(api, policy={"rules": reordered})
    assert (report["flipped"], report["unchanged"], report["flips_by_rule"]) == (0, 2, {})


def test_a_decision_recorded_before_the_rules_were_data_is_counted_under_the_rule_that_matched_it(api, db_session):
    from storage.models import RouterDecision

    seed_board(api, tickets={"PORT-1": "queued"})
    decision = route(api, envelope("state_changed", "PORT-1"))
    # As schema version 5 left it: the policy's three knobs, no rule.
    knobs = {k: decision["policy"][k] for k in ("allowlist", "retry_budget", "fleet_size")}
    RouterDecision.update(policy={"version": "0123456789ab", **knobs}, rule=None).where(
        RouterDecision.id == decision["id"]
    ).execute()
    assert backtest(api)["flipped"] == 0  # read as the document it was: the first policy's rules
    report = backtest(api, policy={"rules": []})
    assert report["flips"][0]["rule"] == {"recorded": "coder", "candidate": None}
    assert report["flips_by_rule"] == {"coder": 1}


def test_a_flip_that_matched_no_rule_either_way_is_counted_under_no_rule(api):
    seed_board(api, tickets={"PORT-1": "queued"})
    route(api, envelope("opened", "PORT-1", actor=STRANGER))  # no rule: blocked on authorization alone
    report = backtest(api, policy={"allowlist": [STRANGER]})
    assert report["flips"][0]["candidate"] == "no_action" and "rule" not in report["flips"][0]
    assert report["flips_by_rule"] == {"(no rule)": 1}


def test_a_candidate_s_rules_are_checked_like_a_policy_s(api):
    twice = [{"name": "same", "role": None, "when": {}}, {"name": "same", "role": "coder", "when": {"sourse": "ci"}}]
    refused = api.post("/api/v1/router/backtest", json={"policy": {"rules": twice}})
    assert refused.status_code == 422
    assert {e["path"] for e in refused.json["errors"]} == {"/policy/rules/1/name", "/policy/rules/1/when/sourse"}


def test_decisions_recorded_without_facts_are_not_replayable_and_never_guessed(api, db_session):
    from storage.models import RouterDecision

    seed_board(api, tickets={"PORT-1": "queued"})
    route(api, envelope("state_changed", "PORT-1", actor=STRANGER))
    route(api, envelope("state_changed", "PORT-1"))
    oldest = RouterDecision.select(RouterDecision.id).order_by(RouterDecision.id).first().id
    RouterDecision.update(facts=None, policy=None).where(RouterDecision.id == oldest).execute()
    report = backtest(api, policy={"allowlist": [STRANGER, *ALLOWLIST]})
    assert (report["evaluated"], report["not_replayable"], report["flipped"], report["unchanged"]) == (2, 1, 0, 1)
    assert api.get("/api/v1/router/decisions").json["decisions"][1]["facts"] is None


def test_the_range_and_the_list_of_flips(api, clock):
    from datetime import timedelta

    from domain.clock import iso

    seed_board(api, tickets={"PORT-1": "queued"})
    first = clock().replace(microsecond=0)
    for _ in range(3):
        route(api, envelope("state_changed", "PORT-1", actor=STRANGER))
        clock.advance(minutes=20)  # each still fresh when it is judged
    candidate = {"allowlist": [STRANGER]}
    assert backtest(api, policy=candidate)["flipped"] == 3
    second = iso(first + timedelta(minutes=20))
    later = backtest(api, policy=candidate, since=second)
    assert (later["evaluated"], later["flipped"]) == (2, 2)
    window = backtest(api, policy=candidate, since=iso(first), until=second)
    assert window["evaluated"] == 1


def test_bad_input_to_a_backtest_is_a_problem_naming_it(api):
    bad = api.post("/api/v1/router/backtest", json={"policy": {"fleet_size": 0}})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")
    unknown = api.post("/api/v1/router/backtest", json={"policy": {"gates": []}})
    assert unknown.status_code == 422
    assert api.post("/api/v1/router/backtest", json={"since": "yesterday"}).status_code == 422


def test_the_scorecard_and_backtest_are_in_the_openapi_document(api):
    paths = api.get("/api/v1/openapi.json").json["paths"]
    assert paths["/api/v1/router/backtest"]["post"]["x-svc-changes-nothing"] is True
    assert "200" in paths["/api/v1/router/scorecard"]["get"]["responses"]


# -- svc backtest --------------------------------------------------------------------------------------------


def cli(capsys, monkeypatch, config, *args):
    monkeypatch.setenv("DATABASE_URL", config.database_url)
    monkeypatch.setenv("SVC_DATA_DIR", str(config.data_dir))
    monkeypatch.setenv("SVC_ROUTER_ALLOWLIST", ",".join(sorted(ALLOWLIST)))
    code = main(["backtest", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def history(api):
    seed_board(api, tickets={"PORT-1": "queued", "PORT-2": "queued"})
    route(api, envelope("state_changed", "PORT-1", actor=STRANGER))
    route(api, envelope("state_changed", "PORT-2", actor=STRANGER))
    route(api, envelope("state_changed", "PORT-2"))


def test_svc_backtest_prints_a_report_for_people_and_one_for_ci(history, config, capsys, monkeypatch):
    code, out, _ = cli(capsys, monkeypatch, config, "--allowlist", f"{STRANGER},{','.join(ALLOWLIST)}")
    assert code == 0
    assert "3 decisions evaluated: 1 unchanged, 2 flipped, 0 not replayable" in out
    assert "flips by gate: authorization 2" in out
    assert out.count("blocked -> would_dispatch because of authorization") == 2

    code, out, _ = cli(capsys, monkeypatch, config, "--format", "json", "--allowlist", STRANGER)
    report = json.loads(out)
    assert code == 0 and report["flipped"] == 3 and report["flips_listed"] == 3
    assert {f["candidate"] for f in report["flips"]} == {"would_dispatch", "blocked"}


def test_svc_backtest_fails_ci_when_more_than_max_flips_flip(history, config, capsys, monkeypatch, tmp_path):
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"allowlist": [STRANGER, *ALLOWLIST]}))
    code, _, err = cli(capsys, monkeypatch, config, "--policy", str(policy), "--max-flips", "1")
    assert code == 1 and "2 decisions flip, more than --max-flips 1" in err, err
    assert cli(capsys, monkeypatch, config, "--policy", str(policy), "--max-flips", "2")[0] == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--since", "yesterday"], "--since: expected an ISO 8601 time"),
        (["--until", "2026-11-01T00:00:00"], "--until: give the zone too"),
        (["--since", "0001-01-01T00:00:00+00:05"], "--since: out of range"),
        (["--retry-budget", "-1"], "--retry-budget: expected a whole number"),
        (["--fleet-size", "0"], "--fleet-size: expected a whole number, 1 or more"),
        (["--max-flips", "some"], "--max-flips: expected a whole number"),
        (["--policy", "/nonexistent/policy.json"], "cannot read the policy file"),
    ],
)
def test_svc_backtest_refuses_bad_input_with_one_line(config, capsys, monkeypatch, args, says):
    code, out, err = cli(capsys, monkeypatch, config, *args)
    assert code == 2 and out == ""
    assert says in err and len(err.strip().splitlines()) == 1


def test_svc_backtest_tries_a_policy_file_s_rules_and_counts_flips_by_rule(
    history, config, capsys, monkeypatch, tmp_path
):
    policy = tmp_path / "policy.json"
    open_door = {"name": "anyone_to_execute", "role": "coder", "when": {"transition.to": "execute"}}
    policy.write_text(json.dumps({"allowlist": [STRANGER], "rules": [open_door]}))
    code, out, _ = cli(capsys, monkeypatch, config, "--policy", str(policy))
    assert code == 0, out
    assert "rules anyone_to_execute (coder, shadow)" in out
    assert "flips by rule: coder 3" in out
    assert "because of authorization; rule coder -> anyone_to_execute" in out


def test_svc_backtest_names_what_is_wrong_in_a_policy_file(config, capsys, monkeypatch, tmp_path):
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"retry_budget": "three"}))
    code, _, err = cli(capsys, monkeypatch, config, "--policy", str(policy))
    assert code == 2 and f"{policy}: /retry_budget:" in err
