"""The first policy is what the router did before its rules were data: under it, every event gets exactly the
decision it got then, outcome, role and every gate's verdict.

The reference is the old code itself, kept here and only here: the three hard-coded rules of `domain/router/rules.py`
as they were, and the evaluation that ran them. Both judge `examples/replay/history.jsonl` and every envelope of
`examples/envelopes/` on several boards, and every webhook fixture of `examples/payloads/` sent through the real
webhook endpoints (its decision, as recorded, held against what the old code makes of its envelope and facts).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from domain.config import Config
from domain.policy.document import Policy
from domain.router.board_view import Facts, RecordedBoardView, RecordingBoardView, SnapshotBoardView, TicketState
from domain.router.evaluation import BLOCKED, NO_ACTION, STUCK, WOULD_DISPATCH, evaluate
from domain.router.gates import GATES, GateInput

from events_kit import (
    ALLOWLIST,
    EXAMPLES,
    GITHUB_SECRET,
    GITLAB_TOKEN,
    TRACKER_SECRET,
    github_headers,
    gitlab_headers,
    http_requests,
    linear_body,
    linear_headers,
    raw_example,
    seed_board,
)
from testclient import ApiClient

# -- the reference: the rules and the evaluation as they were before the policy was data -------------------------

Envelope = dict[str, Any]


@dataclass(frozen=True)
class OldRule:
    name: str
    role: str | None
    matches: Callable[[Envelope], bool]


def awaits_ci(envelope: Envelope) -> bool:
    return envelope["dispatch_hints"].get("blocked_reason") == "await_ci"


def coder_on_execute(envelope: Envelope) -> bool:
    transition = envelope["transition"]
    return (
        transition["kind"] == "state_changed"
        and transition.get("to") == "execute"
        and envelope["dispatch_hints"]["eligible_for_worker"] is True
        and envelope["actor"]["kind"] != "untrusted_comment"
    )


def fixer_on_pipeline_failed(envelope: Envelope) -> bool:
    return envelope["transition"]["kind"] == "pipeline_failed"


OLD_RULES = (
    OldRule("wait_for_ci", None, awaits_ci),
    OldRule("coder", "coder", coder_on_execute),
    OldRule("fixer", "fixer", fixer_on_pipeline_failed),
)


def old_first_match(envelope: Envelope) -> OldRule | None:
    for rule in OLD_RULES:
        if rule.matches(envelope):
            return rule
    return None


def old_evaluate(envelope: Envelope, view, policy: Policy, *, now: datetime) -> tuple:
    """(rule name, outcome, role, gate verdicts) as the old evaluation made them."""
    subject = envelope["subject"]
    key = subject["id"] if subject["type"] == "ticket" else None
    ticket = view.ticket(key) if key is not None else None
    rule = old_first_match(envelope)
    role = rule.role if rule is not None else None
    given = GateInput(envelope, ticket, view, policy, now, role, key)
    verdicts = [(gate.name, gate.check(given)[0]) for gate in GATES]
    passed = all(ok for _, ok in verdicts)
    outcome = BLOCKED if not passed else (WOULD_DISPATCH if role is not None else NO_ACTION)
    return (rule.name if rule is not None else None, outcome, role, verdicts)


def new_evaluate(envelope: Envelope, view, policy: Policy, *, now: datetime) -> tuple:
    result = evaluate(envelope, view, policy, now=now)
    # A fixer whose budget is spent was blocked then; it is `stuck` now (the same verdicts, a name of its own).
    outcome = BLOCKED if result.outcome == STUCK else result.outcome
    return (result.rule_name, outcome, result.role, [(g["gate"], g["passed"]) for g in result.gates])


FIRST = Policy.from_config(Config(router_allowlist=ALLOWLIST, retry_budget_per_day=2))


def test_the_first_policy_is_the_contract_s_example_document():
    assert FIRST.document()["rules"] == [
        {"name": "wait_for_ci", "role": None, "mode": "shadow", "when": {"dispatch_hints.blocked_reason": "await_ci"}},
        {
            "name": "coder",
            "role": "coder",
            "mode": "shadow",
            "when": {
                "transition.kind": "state_changed",
                "transition.to": "execute",
                "dispatch_hints.eligible_for_worker": True,
                "actor.kind": {"not": "untrusted_comment"},
            },
        },
        {"name": "fixer", "role": "fixer", "mode": "shadow", "when": {"transition.kind": "pipeline_failed"}},
    ]


# -- offline: the history and every example envelope, on several boards ------------------------------------------


def history_envelopes() -> list[Envelope]:
    found = []
    for line in (EXAMPLES / "replay" / "history.jsonl").read_text().splitlines():
        document = json.loads(line) if line.strip() else None
        if isinstance(document, dict) and "dispatch_hints" in document:
            found.append(document)
    return found


def example_envelopes() -> list[Envelope]:
    found = []
    for folder in ("valid", "mapping"):
        for path in sorted((EXAMPLES / "envelopes" / folder).glob("*.json")):
            found.append(json.loads(path.read_text()))
    return found


def variants(envelope: Envelope) -> list[Envelope]:
    """The envelope, and the same with what the rules read changed: every actor kind, eligibility both ways, the
    blocked reason set and cleared, the transition to execute."""
    found = [envelope]
    for kind in ("human", "agent", "system", "unknown", "untrusted_comment"):
        found.append({**envelope, "actor": {**envelope["actor"], "kind": kind}})
    for eligible in (True, False):
        found.append({**envelope, "dispatch_hints": {**envelope["dispatch_hints"], "eligible_for_worker": eligible}})
    for reason in ("await_ci", None, "something_else"):
        found.append({**envelope, "dispatch_hints": {**envelope["dispatch_hints"], "blocked_reason": reason}})
    if envelope["transition"]["kind"] == "state_changed":
        found.append({**envelope, "transition": {**envelope["transition"], "to": "execute"}})
        found.append({**envelope, "transition": {k: v for k, v in envelope["transition"].items() if k != "to"}})
    return found


def boards() -> list[SnapshotBoardView]:
    snapshot = SnapshotBoardView.from_document(json.loads((EXAMPLES / "replay" / "snapshot.json").read_text()))
    keys = ("PORT-12", "PORT-14", "PORT-1", "PORT-2")
    found = [snapshot, SnapshotBoardView(tickets={}, initiatives={})]
    for stage, initiative, locked in (
        ("execute", "active", False),
        ("human_test", "agree", False),
        ("ci", "done", True),
    ):
        found.append(
            SnapshotBoardView(
                tickets={k: TicketState(k, stage, "portfolio") for k in keys},
                initiatives={"portfolio": initiative},
                locked=locked,
                running=1 if locked else 0,
            )
        )
    return found


def test_under_the_first_policy_every_example_gets_the_old_decision():
    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    envelopes = [v for e in history_envelopes() + example_envelopes() for v in variants(e)]
    assert len(envelopes) > 200
    compared = rules_seen = 0
    seen: set[str | None] = set()
    for board in boards():
        for envelope in envelopes:
            view = RecordingBoardView(board)
            old = old_evaluate(envelope, view, FIRST, now=now)
            assert new_evaluate(envelope, view, FIRST, now=now) == old, envelope
            if old[1] == WOULD_DISPATCH and old[2] == "fixer" and envelope["subject"]["type"] == "ticket":
                board.note_fixer_dispatch(envelope["subject"]["id"], now)  # as the replay counts them
            compared += 1
            seen.add(old[0])
            rules_seen += old[0] is not None
    assert seen == {"wait_for_ci", "coder", "fixer", None}  # every rule and no rule were met
    assert compared > 1000 and rules_seen > 100


# -- online: every webhook fixture through the real endpoints ----------------------------------------------------


@pytest.fixture
def api(app_factory, config_factory):
    config = config_factory(
        router_allowlist=ALLOWLIST,
        github_webhook_secret=GITHUB_SECRET,
        gitlab_webhook_token=GITLAB_TOKEN,
        tracker_webhook_secret=TRACKER_SECRET,
    )
    api = ApiClient(
        app_factory(config), basic="admin:correct-horse-battery", ci_secret="test-ci-secret-0123456789abcdef"
    )
    seed_board(api, tickets={"PORT-12": "queued", "PORT-14": "ci"})
    return api


GITLAB_EVENTS = {"merge_request": "Merge Request Hook", "pipeline": "Pipeline Hook"}


def deliveries(clock) -> Iterator[tuple[str, bytes, dict[str, str]]]:
    """(endpoint, body, headers) of every webhook fixture, signed as its sender signs it (Linear's with the time it is
    sent at)."""
    for number, path in enumerate(sorted((EXAMPLES / "payloads").rglob("*.json"))):
        relative = str(path.relative_to(EXAMPLES))
        sender = path.parent.name
        if sender == "github":
            body = raw_example(relative)
            yield "forge", body, github_headers(path.name.split(".")[0], f"fixture-{number}", body)
        elif sender == "gitlab":
            event = GITLAB_EVENTS[json.loads(path.read_text())["object_kind"]]
            yield "forge", raw_example(relative), gitlab_headers(event, f"fixture-{number}")
        else:
            body = linear_body(relative, at=clock())
            yield "tracker", body, linear_headers(f"fixture-{number}", body)
    for path in sorted((EXAMPLES / "payloads").rglob("*.http")):
        for request in http_requests(str(path.relative_to(EXAMPLES))):
            yield request.path.rsplit("/", 1)[-1], request.body, request.headers


def test_every_webhook_fixture_is_decided_as_the_old_rules_decided_it(api, clock):
    recorded = []
    for endpoint, body, headers in deliveries(clock):
        answer = api.post(f"/api/v1/webhooks/{endpoint}", body=body, headers=headers, auth=None)
        assert answer.status_code in (200, 202), (endpoint, answer.text)
        if "decision" in answer.json:
            recorded.append(answer.json["decision"])
        clock.advance(seconds=30)
    decisions = {d["id"]: d for d in recorded if d["outcome"] != "rejected"}
    assert len(decisions) >= 20
    for decision in sorted(decisions.values(), key=lambda d: d["id"]):
        facts = Facts.from_dict(decision["facts"])
        at = datetime.fromisoformat(decision["evaluated_at"])
        view = RecordedBoardView(facts, decision["subject_id"], lambda key, since: 0)
        policy = Policy.from_dict(decision["policy"])
        rule, outcome, role, verdicts = old_evaluate(decision["envelope"], view, policy, now=at)
        assert (decision["rule"], decision["outcome"], decision["role"]) == (rule, outcome, role), decision
        assert [(g["gate"], g["passed"]) for g in decision["gates"]] == verdicts, decision
    outcomes = {d["outcome"] for d in decisions.values()}
    assert {WOULD_DISPATCH, BLOCKED, NO_ACTION} <= outcomes
    assert {d["rule"] for d in decisions.values()} >= {"wait_for_ci", "fixer", None}
