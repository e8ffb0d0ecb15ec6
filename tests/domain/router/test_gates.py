"""The gates and rules as small functions, on a board held in memory."""

from datetime import UTC, datetime, timedelta

import pytest

from domain.router.board_view import Facts, RecordingBoardView, SnapshotBoardView, TicketState
from domain.router.evaluation import evaluate
from domain.router.gates import GATE_NAMES, GATES
from domain.router.policy import Policy

from events_kit import example

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
POLICY = Policy(allowlist=frozenset({"gitlab:gitlab-ci", "github:svc-coder[bot]"}), retry_budget=2)


def board(**tickets):
    return SnapshotBoardView(
        tickets={k: TicketState(k, stage, "portfolio") for k, stage in tickets.items()},
        initiatives={"portfolio": "active", "later": "agree"},
    )


def test_the_gates_run_in_the_contracts_order_each_named_once():
    assert GATE_NAMES == ("authorization", "agreement", "budget", "fleet", "human_gate", "retry_budget")
    checks = ["authorization_gate", "agreement_gate", "budget_gate", "fleet_gate", "human_gate", "retry_budget_gate"]
    assert [g.check.__name__ for g in GATES] == checks


def test_a_pr_that_names_no_ticket_is_blocked_on_agreement_but_every_gate_is_recorded():
    envelope = example("envelopes/valid/closed.json")  # subject: a pull request, no ticket
    result = evaluate(envelope, board(), POLICY, now=NOW)
    assert [g["gate"] for g in result.gates] == list(GATE_NAMES)
    failed = {g["gate"]: g["reason"] for g in result.gates if not g["passed"]}
    assert failed == {
        "authorization": "actor github:mona is not on the policy's allowlist",
        "agreement": "no initiative is known for the subject",
    }
    assert result.outcome == "blocked"


def test_the_boards_initiative_wins_over_the_envelopes_claim():
    envelope = example("envelopes/mapping/3-ci-pipeline-failed-fixer.json")
    envelope["subject"]["initiative_id"] = "portfolio"
    view = board(**{"PORT-12": "ci"})
    view.tickets["PORT-12"] = TicketState("PORT-12", "ci", "later")
    result = evaluate(envelope, view, POLICY, now=NOW)
    assert result.gates[1] == {
        "gate": "agreement",
        "passed": False,
        "reason": "initiative later is at agree, not yet agreed",
    }


def test_an_unknown_ticket_is_judged_on_the_envelopes_initiative():
    envelope = example("envelopes/mapping/4-poller-dispatch-requested.json")
    result = evaluate(envelope, board(), Policy(allowlist=frozenset({"svc:poller"})), now=NOW)
    assert all(g["passed"] for g in result.gates)


def test_the_retry_window_is_the_last_day():
    envelope = example("envelopes/mapping/3-ci-pipeline-failed-fixer.json")
    view = board(**{"PORT-12": "ci"})
    view.note_fixer_dispatch("PORT-12", NOW - timedelta(hours=25))
    view.note_fixer_dispatch("PORT-12", NOW - timedelta(hours=2))
    assert evaluate(envelope, view, POLICY, now=NOW).outcome == "would_dispatch"
    view.note_fixer_dispatch("PORT-12", NOW - timedelta(hours=1))
    blocked = evaluate(envelope, view, POLICY, now=NOW)
    assert (blocked.outcome, blocked.role) == ("blocked", "fixer")
    assert evaluate(envelope, view, Policy(POLICY.allowlist, retry_budget=3), now=NOW).outcome == "would_dispatch"


@pytest.mark.parametrize(
    ("envelope", "stage"),
    [
        ("envelopes/mapping/1-tracker-state-changed-queued-to-execute.json", "queued"),  # the coder rule
        ("envelopes/mapping/2-forge-synchronized-agent-await-ci.json", "ci"),  # the wait rule
        ("envelopes/valid/pipeline_passed.json", "ci"),  # no rule
    ],
)
def test_a_used_up_retry_budget_gates_only_fixer_dispatches(envelope, stage):
    document = example(envelope)
    view = board(**{document["subject"]["id"]: stage})
    for hours in (3, 2, 1):
        view.note_fixer_dispatch(document["subject"]["id"], NOW - timedelta(hours=hours))
    retry = evaluate(document, view, POLICY, now=NOW).gates[-1]
    assert retry == {
        "gate": "retry_budget",
        "passed": True,
        "reason": "no fixer rule would dispatch for this event; the budget gates fixers only",
    }
    fixer = example("envelopes/mapping/3-ci-pipeline-failed-fixer.json")
    fixer["subject"]["id"] = document["subject"]["id"]
    assert evaluate(fixer, view, POLICY, now=NOW).gates[-1]["passed"] is False


@pytest.mark.parametrize(
    ("change", "outcome", "role"),
    [
        ({}, "would_dispatch", "coder"),
        ({"dispatch_hints": {"eligible_for_worker": False}}, "no_action", None),
        ({"transition": {"kind": "state_changed", "from": "queued", "to": "ci"}}, "no_action", None),
    ],
)
def test_the_coder_rule(change, outcome, role):
    envelope = {**example("envelopes/mapping/1-tracker-state-changed-queued-to-execute.json"), **change}
    envelope["actor"] = {"kind": "human", "id": "github:svc-coder[bot]"}
    result = evaluate(envelope, board(**{"PORT-12": "queued"}), POLICY, now=NOW)
    assert (result.outcome, result.role) == (outcome, role)


def test_a_recording_view_keeps_exactly_what_the_gates_read_in_the_shape_the_recorded_facts_are_read_back():
    """The facts a decision records (kept on the recording view) are what `Facts` reads back for a backtest."""
    inner = board(**{"PORT-12": "execute"})
    inner.fleet_holders = {"PORT-2", "PORT-3"}
    inner.note_fixer_dispatch("PORT-12", NOW - timedelta(hours=1))
    reading = RecordingBoardView(inner)
    untouched = reading.facts_dict()
    assert untouched == Facts().as_dict()

    result = evaluate(example("envelopes/valid/pipeline_failed.json"), reading, POLICY, now=NOW)
    recorded = reading.facts_dict()
    assert result.role == "fixer"
    assert recorded == {
        "ticket_stage": "execute",
        "ticket_initiative_id": "portfolio",
        "initiative_stage": "active",
        "wallet_locked": False,
        "slots_held_by_others": 2,
        "fixer_dispatches": 1,
    }
    assert Facts.from_dict(recorded).as_dict() == recorded
