"""The gates and rules as small functions, on a board held in memory."""

from datetime import UTC, datetime, timedelta

import pytest

from domain.policy.document import Policy
from domain.router.board_view import Facts, RecordingBoardView, SnapshotBoardView, TicketState
from domain.router.evaluation import evaluate
from domain.router.gates import GATE_NAMES, GATES

from events_kit import example

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
# The examples happened hours before NOW: judged as fresh, except where freshness is what a test is about.
FOREVER = 10**9
POLICY = Policy(allowlist=frozenset({"gitlab:gitlab-ci", "github:svc-coder[bot]"}), retry_budget=2)


def board(**tickets):
    return SnapshotBoardView(
        tickets={k: TicketState(k, stage, "portfolio") for k, stage in tickets.items()},
        initiatives={"portfolio": "active", "later": "agree"},
    )


def test_the_gates_run_in_the_contracts_order_each_named_once():
    assert GATE_NAMES == ("authorization", "agreement", "budget", "fleet", "human_gate", "retry_budget", "fresh")
    checks = ["authorization_gate", "agreement_gate", "budget_gate", "fleet_gate", "human_gate", "retry_budget_gate"]
    checks.append("fresh_gate")
    assert [g.check.__name__ for g in GATES] == checks


def test_a_pr_that_names_no_ticket_is_blocked_on_agreement_but_every_gate_is_recorded():
    envelope = example("envelopes/valid/closed.json")  # subject: a pull request, no ticket
    result = evaluate(envelope, board(), POLICY, now=NOW, max_age=FOREVER)
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
    result = evaluate(envelope, view, POLICY, now=NOW, max_age=FOREVER)
    assert result.gates[1] == {
        "gate": "agreement",
        "passed": False,
        "reason": "initiative later is at agree, not yet agreed",
    }


def test_an_unknown_ticket_is_judged_on_the_envelopes_initiative():
    envelope = example("envelopes/mapping/4-poller-dispatch-requested.json")
    result = evaluate(envelope, board(), Policy(allowlist=frozenset({"svc:poller"})), now=NOW, max_age=FOREVER)
    assert all(g["passed"] for g in result.gates)


def test_the_retry_budget_counts_fixers_since_the_last_green_pipeline():
    envelope = example("envelopes/mapping/3-ci-pipeline-failed-fixer.json")
    view = board(**{"PORT-12": "ci"})
    view.note_fixer_dispatch("PORT-12", NOW - timedelta(hours=25))
    assert evaluate(envelope, view, POLICY, now=NOW, max_age=FOREVER).outcome == "would_dispatch"
    view.note_fixer_dispatch("PORT-12", NOW - timedelta(hours=1))
    spent = evaluate(envelope, view, POLICY, now=NOW, max_age=FOREVER)
    # A fixer whose budget is spent is `stuck` (the ticket goes to blocked), not merely blocked.
    assert (spent.outcome, spent.role) == ("stuck", "fixer")
    assert gate_of(spent, "retry_budget") == {
        "gate": "retry_budget",
        "passed": False,
        "reason": "2 of 2 fixer dispatches used since the last green pipeline",
    }
    assert evaluate(envelope, view, Policy(POLICY.allowlist, retry_budget=3), now=NOW, max_age=FOREVER).outcome == (
        "would_dispatch"
    )
    view.note_green("PORT-12")  # a green pipeline: counted afresh
    assert evaluate(envelope, view, POLICY, now=NOW, max_age=FOREVER).outcome == "would_dispatch"


def test_an_event_older_than_the_max_age_is_routed_but_never_dispatched():
    envelope = example("envelopes/mapping/1-tracker-state-changed-queued-to-execute.json")
    view = board(**{"PORT-12": "queued"})
    policy = Policy(allowlist=frozenset({envelope["actor"]["id"]}))
    occurred = datetime.fromisoformat(envelope["occurred_at"])
    fresh = evaluate(envelope, view, policy, now=occurred + timedelta(seconds=3600), max_age=3600)
    assert (fresh.outcome, gate_of(fresh, "fresh")) == (
        "would_dispatch",
        {"gate": "fresh", "passed": True, "reason": "60 min old"},
    )
    stale = evaluate(envelope, view, policy, now=occurred + timedelta(hours=3), max_age=3600)
    assert (stale.outcome, stale.role) == ("blocked", "coder")
    assert gate_of(stale, "fresh") == {
        "gate": "fresh",
        "passed": False,
        "reason": "3 h old, older than 60 min (SVC_DISPATCH_MAX_AGE_SECONDS)",
    }
    # An event from the future (a sender's clock ahead of ours) is as fresh as can be.
    assert gate_of(evaluate(envelope, view, policy, now=occurred - timedelta(hours=1)), "fresh")["passed"]


def test_a_ticket_still_in_agreement_fails_the_agreement_gate_whatever_its_initiative():
    envelope = example("envelopes/mapping/1-tracker-state-changed-queued-to-execute.json")
    result = evaluate(envelope, board(**{"PORT-12": "agreement"}), POLICY, now=NOW, max_age=FOREVER)
    assert gate_of(result, "agreement") == {
        "gate": "agreement",
        "passed": False,
        "reason": "PORT-12 is itself still in agreement",
    }


def test_the_service_s_own_event_is_own_and_never_dispatches():
    envelope = example("envelopes/mapping/1-tracker-state-changed-queued-to-execute.json")
    result = evaluate(envelope, board(**{"PORT-12": "queued"}), POLICY, now=NOW, max_age=FOREVER, own=True)
    assert (result.outcome, result.role) == ("own", "coder")


def gate_of(result, name):
    return next(g for g in result.gates if g["gate"] == name)


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
    retry = gate_of(evaluate(document, view, POLICY, now=NOW, max_age=FOREVER), "retry_budget")
    assert retry == {
        "gate": "retry_budget",
        "passed": True,
        "reason": "no fixer rule would dispatch for this event; the budget gates fixers only",
    }
    fixer = example("envelopes/mapping/3-ci-pipeline-failed-fixer.json")
    fixer["subject"]["id"] = document["subject"]["id"]
    assert gate_of(evaluate(fixer, view, POLICY, now=NOW, max_age=FOREVER), "retry_budget")["passed"] is False


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
    result = evaluate(envelope, board(**{"PORT-12": "queued"}), POLICY, now=NOW, max_age=FOREVER)
    assert (result.outcome, result.role) == (outcome, role)


def test_a_recording_view_keeps_exactly_what_the_gates_read_in_the_shape_the_recorded_facts_are_read_back():
    """The facts a decision records (kept on the recording view) are what `Facts` reads back for a backtest."""
    inner = board(**{"PORT-12": "execute"})
    inner.running = 2
    inner.note_fixer_dispatch("PORT-12", NOW - timedelta(hours=1))
    reading = RecordingBoardView(inner)
    untouched = reading.facts_dict()
    assert untouched == Facts().as_dict()

    result = evaluate(example("envelopes/valid/pipeline_failed.json"), reading, POLICY, now=NOW, max_age=FOREVER)
    recorded = reading.facts_dict()
    assert result.role == "fixer"
    assert recorded == {
        "ticket_stage": "execute",
        "initiative_stage": "active",
        "wallet_locked": False,
        "jobs_running": 2,
        "fixer_dispatches": 1,
        "age_seconds": (
            NOW - datetime.fromisoformat(example("envelopes/valid/pipeline_failed.json")["occurred_at"])
        ).total_seconds(),
    }
    assert Facts.from_dict(recorded).as_dict() == recorded


def test_an_unmoved_view_reads_each_fact_once_and_the_gates_judge_as_through_the_board():
    """What a record-only batch (`svc import`) reads through: every decision the same as read straight from the
    board, with each fact read from it once for the batch."""
    from collections import Counter

    from domain.router.board_view import UnmovedBoardView

    inner = board(**{"PORT-12": "execute"})
    inner.note_fixer_dispatch("PORT-12", NOW - timedelta(hours=1))
    reads: Counter = Counter()

    class Counting:
        def __getattr__(self, name):
            def read(*args):
                reads[name] += 1
                return getattr(inner, name)(*args)

            return read

    unmoved = UnmovedBoardView(Counting())
    for name in ("pipeline_failed", "state_changed", "opened", "pipeline_failed"):
        document = example(f"envelopes/valid/{name}.json")
        straight, batched = RecordingBoardView(inner), RecordingBoardView(unmoved)
        expected = evaluate(document, straight, POLICY, now=NOW, max_age=FOREVER)
        assert evaluate(document, batched, POLICY, now=NOW, max_age=FOREVER) == expected
        assert batched.facts_dict() == straight.facts_dict()
    assert reads["ticket"] == reads["initiative_stage"] == reads["wallet_locked"] == reads["jobs_running"] == 1
    assert reads["fixer_dispatches"] == 1 and reads["age_seconds"] == 4
