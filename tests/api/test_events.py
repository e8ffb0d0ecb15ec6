"""POST /api/v1/events and the decisions it records, through HTTP: the seed's four mapping examples, its
errors about events, duplicates, rejected envelopes, batches and credentials."""

import pytest
from dispatch_kit import claim, make_job, worker

from events_kit import ALLOWLIST, example, gate, seed_board
from testclient import ApiClient

MAPPING = "envelopes/mapping/"


@pytest.fixture
def api(app_factory, config_factory):
    app = app_factory(config_factory(router_allowlist=ALLOWLIST))
    return ApiClient(app, basic="admin:correct-horse-battery", ci_secret="test-ci-secret-0123456789abcdef")


@pytest.fixture
def board(api):
    seed_board(api, tickets={"PORT-12": "queued", "PORT-14": "queued"})
    return api


def post_event(api, envelope, **kw):
    return api.post("/api/v1/events", json=envelope, auth="ci", **kw)


def decisions(api, query=""):
    return api.get("/api/v1/router/decisions" + query).json["decisions"]


def test_mapping_1_tracker_moves_to_execute_would_dispatch_the_coder(board):
    result = post_event(board, example(MAPPING + "1-tracker-state-changed-queued-to-execute.json"))
    assert result.status_code == 202
    decision = result.json["decision"]
    assert result.json["event_id"] == "linear:5f0c2b9e-8d1a-4c3b-a2e4-6b7c8d9e0f12"
    assert (decision["outcome"], decision["role"], decision["dispatched"]) == ("would_dispatch", "coder", False)
    assert [g["gate"] for g in decision["gates"]] == [
        "authorization",
        "agreement",
        "budget",
        "fleet",
        "human_gate",
        "retry_budget",
        "fresh",
    ]
    assert all(g["passed"] for g in decision["gates"])
    assert decision["mode"] == "shadow"
    assert (decision["source"], decision["kind"], decision["subject_id"]) == ("tracker", "state_changed", "PORT-12")


def test_mapping_2_an_agent_push_waits_for_ci_and_dispatches_nothing(board):
    result = post_event(board, example(MAPPING + "2-forge-synchronized-agent-await-ci.json"))
    assert result.status_code == 202
    decision = result.json["decision"]
    assert all(g["passed"] for g in decision["gates"])
    assert (decision["outcome"], decision["role"]) == ("no_action", None)
    assert decision["envelope"]["dispatch_hints"]["blocked_reason"] == "await_ci"


def test_mapping_3_a_red_pipeline_dispatches_the_fixer_within_the_retry_budget(board, clock):
    envelope = example(MAPPING + "3-ci-pipeline-failed-fixer.json")
    outcomes = []
    for attempt in range(3):
        clock.advance(minutes=10)
        result = post_event(board, {**envelope, "id": f"{envelope['id']}-{attempt}"})
        assert result.status_code == 202
        outcomes.append((result.json["decision"]["outcome"], result.json["decision"]["role"]))
    # The budget counts fixer jobs since the last green pipeline: a shadow rule dispatches none, so it never runs out
    # (a live fixer's does: tests/api/test_loop.py).
    assert outcomes == [("would_dispatch", "fixer")] * 3
    third = decisions(board, "?limit=1")[0]
    assert gate(third, "retry_budget") == {
        "gate": "retry_budget",
        "passed": True,
        "reason": "0 of 2 fixer dispatches used since the last green pipeline",
    }


def test_mapping_4_the_poller_asks_for_dispatch_of_a_queued_ticket(board):
    result = post_event(board, example(MAPPING + "4-poller-dispatch-requested.json"))
    assert result.status_code == 202
    decision = result.json["decision"]
    assert (decision["source"], decision["kind"], decision["subject_id"]) == ("poller", "dispatch_requested", "PORT-14")
    # No rule dispatches on dispatch_requested in shadow mode; every gate is still evaluated and recorded.
    assert (decision["outcome"], decision["role"]) == ("no_action", None)
    assert len(decision["gates"]) == 7


def test_errors_row_an_unknown_actor_fails_authorization_closed(board):
    envelope = example(MAPPING + "1-tracker-state-changed-queued-to-execute.json")
    envelope["actor"] = {"kind": "unknown"}
    decision = post_event(board, envelope).json["decision"]
    assert decision["outcome"] == "blocked"
    assert gate(decision, "authorization") == {
        "gate": "authorization",
        "passed": False,
        "reason": "actor kind unknown fails closed",
    }
    # Every other gate is still evaluated and recorded.
    assert all(g["passed"] for g in decision["gates"] if g["gate"] != "authorization")


@pytest.mark.parametrize("kind", ["unknown", "untrusted_comment"])
def test_fail_closed_actor_kinds_never_dispatch_even_with_an_allowlisted_id(board, kind):
    envelope = example(MAPPING + "1-tracker-state-changed-queued-to-execute.json")
    envelope["actor"]["kind"] = kind
    decision = post_event(board, envelope).json["decision"]
    assert decision["outcome"] == "blocked"
    assert decision["role"] is None if kind == "untrusted_comment" else decision["role"] == "coder"


def test_an_actor_off_the_allowlist_is_blocked(app_factory, config_factory):
    api = ApiClient(
        app_factory(config_factory()), basic="admin:correct-horse-battery", ci_secret="test-ci-secret-0123456789abcdef"
    )
    seed_board(api, tickets={"PORT-12": "queued"})
    decision = post_event(api, example(MAPPING + "1-tracker-state-changed-queued-to-execute.json")).json["decision"]
    assert decision["outcome"] == "blocked"
    assert "not on the policy's allowlist" in gate(decision, "authorization")["reason"]


@pytest.mark.parametrize(
    ("setup", "gate_name"),
    [
        ("initiative_agree", "agreement"),
        ("wallet_locked", "budget"),
        ("fleet_busy", "fleet"),
        ("human_test", "human_gate"),
    ],
)
def test_each_gate_blocks_on_its_own(api, setup, gate_name):
    seed_board(
        api,
        tickets={"PORT-12": "human_test" if setup == "human_test" else "queued", "PORT-20": "execute"},
        initiative_stage="agree" if setup == "initiative_agree" else "active",
    )
    if setup == "wallet_locked":
        api.put("/api/v1/wallet", json={"budget": 100, "spent": 100, "locked": True})
    if setup == "fleet_busy":  # a job runs for PORT-20: the fleet of one is full
        make_job("PORT-20")
        assert claim(worker(api)).status_code == 200
    decision = post_event(api, example(MAPPING + "1-tracker-state-changed-queued-to-execute.json")).json["decision"]
    assert decision["outcome"] == "blocked"
    assert [g["gate"] for g in decision["gates"] if not g["passed"]] == [gate_name]


def test_a_transition_leading_to_a_human_gate_is_blocked(board):
    envelope = example("envelopes/valid/needs_you.json")
    decision = post_event(board, envelope).json["decision"]
    assert gate(decision, "human_gate") == {
        "gate": "human_gate",
        "passed": False,
        "reason": "the transition leads to the human gate human_test",
    }


def test_the_same_event_id_again_answers_200_with_the_first_decision_and_records_nothing(board, clock):
    envelope = example(MAPPING + "1-tracker-state-changed-queued-to-execute.json")
    first = post_event(board, envelope)
    clock.advance(minutes=5)
    board.put("/api/v1/wallet", json={"budget": 1, "spent": 1, "locked": True})  # would now be blocked
    again = post_event(board, envelope)
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json == first.json
    assert len(decisions(board)) == 1


def test_a_malformed_envelope_is_422_and_recorded_as_rejected(board):
    envelope = example("envelopes/invalid/ci-kind-without-pipeline-status.json")
    result = post_event(board, envelope)
    assert result.status_code == 422
    assert result.headers["content-type"] == "application/problem+json"
    assert [e["path"] for e in result.json["errors"]] == ["/forge/pipeline_status"]
    recorded = decisions(board)
    assert len(recorded) == 1
    rejected = recorded[0]
    assert (rejected["outcome"], rejected["event_id"], rejected["gates"], rejected["role"]) == (
        "rejected",
        envelope["id"],
        [],
        None,
    )
    assert rejected["errors"] == result.json["errors"]
    assert rejected["envelope"] == envelope
    assert result.json["decision"] == rejected


def test_a_rejected_envelope_is_recorded_and_echoed_exactly_even_where_orjson_cannot_write_it(board):
    # orjson writes answers and rows, but refuses integers beyond 64 bits; those documents go through json.
    envelope = {**example(MAPPING + "3-ci-pipeline-failed-fixer.json"), "id": "big-1", "source": "nowhere"}
    envelope["forge"] = {**envelope["forge"], "pipeline_id": 10**40}
    result = post_event(board, envelope)
    assert result.status_code == 422
    assert result.json["decision"]["envelope"]["forge"]["pipeline_id"] == 10**40
    assert decisions(board)[0]["envelope"] == envelope


def test_a_rejected_envelope_does_not_use_up_its_event_id(board):
    good = example(MAPPING + "3-ci-pipeline-failed-fixer.json")
    broken = {**good, "forge": {"pipeline_id": 8201}}
    assert post_event(board, broken).status_code == 422
    assert post_event(board, broken).status_code == 422  # each rejection is recorded
    assert post_event(board, good).status_code == 202
    assert [d["outcome"] for d in decisions(board)] == ["would_dispatch", "rejected", "rejected"]


def test_a_rejected_envelope_without_a_string_id_has_no_event_id(board):
    result = post_event(board, {"schema": "svc.normalized-event/v0", "id": 12, "source": "forge"})
    assert result.status_code == 422
    assert result.json["decision"]["event_id"] is None
    assert result.json["decision"]["source"] == "forge"
    assert {e["path"] for e in result.json["errors"]} >= {"/id", "/occurred_at", "/transition", "/actor"}


def test_a_body_that_is_not_an_object_is_refused_and_recorded_nowhere(board):
    for body in (b"[1, 2]", b'"x"', b'{"events": []}'):
        result = board.post("/api/v1/events", body=body, auth="ci", headers={"Content-Type": "application/json"})
        assert result.status_code == 422
    assert (
        board.post("/api/v1/events", body=b"{", auth="ci", headers={"Content-Type": "application/json"}).status_code
        == 400
    )
    assert decisions(board) == []


def test_a_batch_routes_each_envelope_in_order_and_answers_each(board):
    failing = example(MAPPING + "3-ci-pipeline-failed-fixer.json")
    batch = {
        "events": [
            example(MAPPING + "1-tracker-state-changed-queued-to-execute.json"),
            {**failing, "id": "gitlab:a"},
            {**failing, "id": "gitlab:b"},
            {**failing, "id": "gitlab:c"},
            {**failing, "id": "gitlab:a"},
            {"schema": "svc.normalized-event/v0", "id": "broken"},
        ]
    }
    result = post_event(board, batch)
    assert result.status_code == 200
    body = result.json
    assert [r["status"] for r in body["results"]] == [202, 202, 202, 202, 200, 422]
    assert [r["decision"]["outcome"] for r in body["results"]] == [
        "would_dispatch",
        "would_dispatch",
        "would_dispatch",
        "would_dispatch",
        "would_dispatch",
        "rejected",
    ]
    assert (body["accepted"], body["duplicates"], body["rejected"]) == (4, 1, 1)
    assert body["results"][4]["decision"] == body["results"][1]["decision"]
    assert len(decisions(board)) == 5


def test_a_batch_over_500_is_refused_whole(board):
    envelope = example(MAPPING + "4-poller-dispatch-requested.json")
    result = post_event(board, {"events": [{**envelope, "id": f"p{i}"} for i in range(501)]})
    assert result.status_code == 422
    assert result.json["errors"][0]["path"] == "/events"
    assert decisions(board) == []


@pytest.mark.parametrize("auth", [None, "basic"])
def test_events_need_the_ci_secret_and_record_nothing_without_it(board, auth):
    result = board.post(
        "/api/v1/events", json=example(MAPPING + "1-tracker-state-changed-queued-to-execute.json"), auth=auth
    )
    assert result.status_code == 401
    assert result.headers["content-type"] == "application/problem+json"
    assert decisions(board) == []


def test_decisions_need_basic_credentials(board):
    assert board.get("/api/v1/router/decisions", auth=None).status_code == 401
    assert board.get("/api/v1/router/decisions", auth="ci").status_code == 401


def test_decisions_filter_by_outcome_source_subject_and_since(board, clock):
    post_event(board, example(MAPPING + "1-tracker-state-changed-queued-to-execute.json"))
    clock.advance(minutes=30)
    post_event(board, example(MAPPING + "2-forge-synchronized-agent-await-ci.json"))
    post_event(board, example(MAPPING + "4-poller-dispatch-requested.json"))
    post_event(board, {"schema": "nope", "id": "bad-1"})

    def kinds(query):
        return [d["kind"] for d in decisions(board, query)]

    assert kinds("") == [None, "dispatch_requested", "synchronized", "state_changed"]
    assert kinds("?outcome=no_action") == ["dispatch_requested", "synchronized"]
    assert kinds("?source=tracker") == ["state_changed"]
    assert kinds("?subject_id=PORT-14") == ["dispatch_requested"]
    assert kinds("?outcome=rejected") == [None]
    since = "2026-11-20T10:20:00Z"
    assert kinds(f"?since={since}&outcome=no_action&source=forge") == ["synchronized"]
    assert kinds("?since=2026-11-20T12:00:00Z") == []


@pytest.mark.parametrize(
    "query",
    ["?outcome=maybe", "?source=jenkins", "?since=yesterday", "?since=2026-11-20T10:00:00", "?limit=0", "?cursor=zz"],
)
def test_bad_decision_queries_are_400_naming_the_parameter(board, query):
    result = board.get("/api/v1/router/decisions" + query)
    assert result.status_code == 400
    assert result.json["errors"][0]["path"] == query[1:].split("=")[0]


@pytest.mark.parametrize("since", ["0001-01-01T00:00:00%2B00:05", "9999-12-31T23:59:59-01:00"])
def test_a_since_outside_the_representable_range_is_400_not_a_crash(board, since):
    # Found by a randomized schemathesis run: converting such a timestamp to UTC overflowed (a 500).
    result = board.get("/api/v1/router/decisions?since=" + since)
    assert result.status_code == 400
    assert result.json["errors"][0]["path"] == "since"


def test_decisions_page_newest_first_with_a_keyset_cursor(board):
    envelope = example(MAPPING + "4-poller-dispatch-requested.json")
    for i in range(7):
        post_event(board, {**envelope, "id": f"poller:PORT-14:{i}"})
    seen, cursor = [], None
    while True:
        page = board.get("/api/v1/router/decisions?limit=3" + (f"&cursor={cursor}" if cursor else "")).json
        seen.extend(d["event_id"] for d in page["decisions"])
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == [f"poller:PORT-14:{i}" for i in reversed(range(7))]
    ids = [d["id"] for d in decisions(board, "?limit=7")]
    assert ids == sorted(ids, reverse=True)


def test_the_fleet_counts_running_jobs_not_held_slots(api):
    seed_board(api, tickets={"PORT-12": "queued", "PORT-20": "queued"})
    assert api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-12"}).status_code == 200
    api.post("/api/v1/tickets/PORT-12/move", json={"to": "execute"})
    other = example(MAPPING + "3-ci-pipeline-failed-fixer.json")
    other["subject"] = {"type": "ticket", "id": "PORT-20"}
    decision = post_event(api, other).json["decision"]
    # A slot held in execute is no job running: the fleet of one has room (a claim counts the same way).
    assert gate(decision, "fleet") == {"gate": "fleet", "passed": True, "reason": "0 job(s) running; fleet size 1"}
    assert decision["facts"]["jobs_running"] == 0
    make_job("PORT-12")
    assert claim(worker(api)).status_code == 200
    other["id"] = "gitlab:other"
    decision = post_event(api, other).json["decision"]
    assert gate(decision, "fleet") == {"gate": "fleet", "passed": False, "reason": "1 job(s) running; fleet size 1"}


def test_a_batch_item_that_is_not_an_object_is_rejected_and_recorded(board):
    result = post_event(board, {"events": [7, example(MAPPING + "4-poller-dispatch-requested.json")]})
    assert result.status_code == 200
    assert [r["status"] for r in result.json["results"]] == [422, 202]
    rejected = result.json["results"][0]["decision"]
    assert (rejected["envelope"], rejected["event_id"], rejected["errors"][0]["path"]) == (7, None, "")
