"""Live dispatch over HTTP: a live rule's passing decision queues one job; workers claim, heartbeat and hand back
results through the output gate; people list, read and cancel jobs; a worker reaches nothing else."""

from __future__ import annotations

import pytest
from dispatch_kit import board, claim, output, policy, queue_job, set_policy, worker

from domain.clock import iso
from storage.db import connection

from events_kit import gate
from router_kit import allowlisted, envelope

pytestmark = pytest.mark.both_backends


@pytest.fixture
def api(app_factory, config_factory):
    return allowlisted(app_factory, config_factory)


def rows(kind: str | None = None) -> list:
    from storage.db import connection
    from storage.models import OutboxMessage

    with connection():
        query = OutboxMessage.select().order_by(OutboxMessage.id)
        if kind is not None:
            query = query.where(OutboxMessage.kind == kind)
        return list(query)


def pause(paused: bool, clock) -> None:
    from domain.config import Config

    dispatch(Config(), clock).set_switch(paused=paused, reason="a test pauses" if paused else None, actor="admin")


def live_job(api, key: str = "PORT-7") -> dict:
    board(api, key)
    set_policy(api, policy())
    decision = queue_job(api, key)
    assert decision["dispatched"] is True, decision
    return api.get(f"/api/v1/dispatch/jobs/{decision['job_id']}").json


# -- decisions and the jobs they queue -----------------------------------------------------------------------------


def test_under_shadow_rules_nothing_is_dispatched_and_the_decision_says_so(api):
    board(api, "PORT-7")
    decision = queue_job(api)
    assert decision["outcome"] == "would_dispatch"
    assert (decision["mode"], decision["dispatched"], decision["job_id"]) == ("shadow", False, None)
    assert api.get("/api/v1/dispatch/jobs").json == {"jobs": [], "next": None}


def test_a_live_rules_passing_decision_queues_one_job_and_a_redelivery_none(api):
    board(api, "PORT-7")
    set_policy(api, policy())
    event = envelope("state_changed", "PORT-7")
    first = api.post("/api/v1/events", json=event, auth="ci")
    assert first.status_code == 202
    decision = first.json["decision"]
    assert (decision["mode"], decision["dispatched"]) == ("live", True)
    again = api.post("/api/v1/events", json=event, auth="ci")
    assert again.status_code == 200 and again.json["decision"]["job_id"] == decision["job_id"]
    jobs = api.get("/api/v1/dispatch/jobs").json["jobs"]
    assert [(j["id"], j["decision_id"], j["ticket"], j["role"], j["rule"], j["state"]) for j in jobs] == [
        (decision["job_id"], decision["id"], "PORT-7", "coder", "coder", "queued")
    ]
    listed = api.get("/api/v1/router/decisions").json["decisions"][0]
    assert (listed["dispatched"], listed["job_id"]) == (True, decision["job_id"])


def test_a_live_rule_blocked_by_a_gate_or_a_paused_switch_queues_nothing(api, clock):
    board(api, "PORT-7", "PORT-8")
    set_policy(api, policy())
    blocked = queue_job(api, "PORT-7", actor="github:bob")  # not on the allowlist
    assert blocked["outcome"] == "blocked" and not gate(blocked, "authorization")["passed"]
    assert (blocked["mode"], blocked["dispatched"], blocked["job_id"]) == ("live", False, None)
    pause(True, clock)
    paused = queue_job(api, "PORT-8")
    # Paused: the job waits, held, until dispatch resumes; the decision says so.
    assert (paused["outcome"], paused["mode"], paused["dispatched"], paused["held"]) == (
        "would_dispatch",
        "live",
        False,
        True,
    )
    assert [(j["id"], j["state"]) for j in api.get("/api/v1/dispatch/jobs").json["jobs"]] == [
        (paused["job_id"], "held")
    ]


# -- claims ------------------------------------------------------------------------------------------------------


def test_a_claim_takes_the_oldest_job_holds_the_bay_and_moves_the_ticket(api):
    bay = worker(api)
    board(api, "PORT-7", "PORT-8")
    set_policy(api, policy(fleet_size=2))
    first, second = queue_job(api, "PORT-7"), queue_job(api, "PORT-8")
    answer = claim(bay)
    assert answer.status_code == 200, answer.text
    job = answer.json["job"]
    assert (job["id"], job["state"], job["bay"], job["worker"]) == (first["job_id"], "running", "bay-1", "bay-1")
    assert answer.json["lease_seconds"] == 300 and job["envelope"]["subject"]["id"] == "PORT-7"
    assert (job["ticket"]["stage"], job["ticket"]["waiting_on"], job["ticket"]["assigned_slot"]) == (
        "execute",
        "agent",
        "bay-1",
    )
    entry = api.get("/api/v1/tickets/PORT-7").json["timeline"][0]
    assert entry["kind"] == "job_claimed" and entry["summary"].startswith("claimed by bay-1 in bay-1")
    slots = {s["name"]: s["ticket"] for s in api.get("/api/v1/slots").json["slots"]}
    assert slots == {"bay-1": "PORT-7"}
    # The second job needs another bay: bay-1 is PORT-7's.
    assert claim(worker(api, "bay-2"), "bay-2").json["job"]["id"] == second["job_id"]


def test_a_claim_is_204_when_the_fleet_is_full_nothing_is_queued_or_dispatch_is_paused(api, clock):
    bay = worker(api)
    nothing = claim(bay)
    assert (nothing.status_code, nothing.headers["Svc-Idle-Reason"]) == (204, "nothing-queued")
    board(api, "PORT-7", "PORT-8")
    set_policy(api, policy(fleet_size=1))
    queue_job(api, "PORT-7")
    queue_job(api, "PORT-8")
    pause(True, clock)
    paused = claim(bay)
    assert (paused.status_code, paused.headers["Svc-Idle-Reason"]) == (204, "paused")
    pause(False, clock)
    assert claim(bay).status_code == 200
    full = claim(worker(api, "bay-2"), "bay-2")
    assert (full.status_code, full.headers["Svc-Idle-Reason"]) == (204, "fleet-full")  # fleet_size 1: one job runs
    assert [j["state"] for j in api.get("/api/v1/dispatch/jobs").json["jobs"]] == ["queued", "running"]


def test_a_bay_held_by_another_ticket_is_409_and_the_job_stays_queued(api):
    bay = worker(api)
    board(api, "PORT-7", "PORT-9")
    assert api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-9"}).status_code == 200
    set_policy(api, policy())
    decision = queue_job(api, "PORT-7")
    refused = claim(bay)
    assert refused.status_code == 409 and "held by PORT-9" in refused.json["detail"]
    assert api.get(f"/api/v1/dispatch/jobs/{decision['job_id']}").json["state"] == "queued"


def test_a_claim_cancels_jobs_whose_ticket_was_stopped_and_leaves_those_of_another_bay(api):
    bay = worker(api)
    board(api, "PORT-5", "PORT-6", "PORT-7", "PORT-8")
    set_policy(api, policy(fleet_size=4))
    jobs = {key: queue_job(api, key)["job_id"] for key in ("PORT-5", "PORT-6", "PORT-7", "PORT-8")}
    assert api.post("/api/v1/tickets/PORT-5/move", json={"to": "blocked"}).status_code == 200
    assert api.post("/api/v1/tickets/PORT-6/cancel", json={}).status_code == 200
    assert api.post("/api/v1/slots/bay-9/claim", json={"ticket": "PORT-7"}).status_code == 200
    taken = claim(bay)
    assert taken.status_code == 200 and taken.json["job"]["id"] == jobs["PORT-8"]
    states = {j["ticket"]: (j["state"], j["failure"]) for j in api.get("/api/v1/dispatch/jobs").json["jobs"]}
    # Blocking or cancelling a ticket cancelled its job at once; the claim passed PORT-7's, which works in bay-9.
    assert states == {
        "PORT-5": ("cancelled", {"kind": "cancelled", "detail": "PORT-5 is blocked"}),
        "PORT-6": ("cancelled", {"kind": "cancelled", "detail": "PORT-6 is cancelled"}),
        "PORT-7": ("queued", None),  # PORT-7 works in bay-9: that bay's worker takes it
        "PORT-8": ("running", None),
    }
    assert claim(worker(api, "bay-9"), "bay-9").json["job"]["id"] == jobs["PORT-7"]


# -- who may call what -----------------------------------------------------------------------------------------


def test_a_worker_reaches_only_its_endpoints_its_jobs_and_their_tickets(api):
    bay = worker(api)
    job = live_job(api, "PORT-7")
    api.post("/api/v1/tickets", json={"key": "PORT-8", "initiative_id": "portfolio", "title": "Other"})
    for path in ("/api/v1/tickets", "/api/v1/slots", "/api/v1/dispatch/jobs", "/api/v1/router/decisions"):
        refused = bay.get(path)
        assert refused.status_code == 403 and refused.headers["content-type"] == "application/problem+json", path
    assert bay.get("/", headers={"Accept": "text/html"}).status_code == 403
    assert bay.post("/api/v1/tickets/PORT-7/move", json={"to": "blocked"}).status_code == 403
    # Before its claim, the job and the ticket are not its own.
    assert bay.get(f"/api/v1/dispatch/jobs/{job['id']}").status_code == 403
    assert bay.get("/api/v1/tickets/PORT-7").status_code == 403
    assert claim(bay).status_code == 200
    assert bay.get(f"/api/v1/dispatch/jobs/{job['id']}").json["state"] == "running"
    assert bay.get("/api/v1/tickets/PORT-7").json["key"] == "PORT-7"
    assert bay.get("/api/v1/tickets/PORT-8").status_code == 403


def test_only_workers_claim_heartbeat_and_hand_back_results(api):
    job = live_job(api)
    for path, body in (
        ("/api/v1/dispatch/claim", {"bay": "bay-1"}),
        (f"/api/v1/dispatch/jobs/{job['id']}/heartbeat", {}),
        (f"/api/v1/dispatch/jobs/{job['id']}/result", output(job)),
    ):
        refused = api.post(path, json=body)
        assert refused.status_code == 403 and refused.json["type"].endswith("/workers-only"), path
    assert api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["state"] == "queued"


# -- heartbeats and cancel -----------------------------------------------------------------------------------------


def test_a_heartbeat_renews_the_lease_and_another_workers_is_409(api, clock):
    bay, other = worker(api), worker(api, "bay-2")
    job = live_job(api)
    claimed = claim(bay).json["job"]
    clock.advance(seconds=100)
    beat = bay.post(f"/api/v1/dispatch/jobs/{job['id']}/heartbeat", json={})
    assert beat.status_code == 200 and beat.json["cancel"] is False
    assert beat.json["leased_until"] > claimed["leased_until"]
    seen = api.get(f"/api/v1/dispatch/jobs/{job['id']}").json
    assert (claimed["heartbeat_at"], seen["heartbeat_at"]) == (claimed["claimed_at"], iso(clock()))
    assert other.post(f"/api/v1/dispatch/jobs/{job['id']}/heartbeat", json={}).status_code == 409
    assert other.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=output(job)).status_code == 409


def test_a_cancelled_job_tells_its_worker_to_stop(api):
    bay = worker(api)
    job = live_job(api, "PORT-7")
    claim(bay)
    cancelled = api.post(f"/api/v1/dispatch/jobs/{job['id']}/cancel", json={"reason": "wrong ticket"})
    assert cancelled.status_code == 200 and cancelled.json["state"] == "cancelled"
    beat = bay.post(f"/api/v1/dispatch/jobs/{job['id']}/heartbeat")
    assert beat.status_code == 200 and (beat.json["cancel"], beat.json["reason"]) == (True, "wrong ticket")
    assert bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=output(job)).status_code == 409
    assert api.post(f"/api/v1/dispatch/jobs/{job['id']}/cancel").status_code == 409
    assert api.get("/api/v1/tickets/PORT-7").json["timeline"][0]["kind"] == "job_cancelled"


@pytest.mark.parametrize("action", ["cancel", "mark_done", "move"])
def test_a_ticket_finished_or_blocked_tells_its_worker_to_stop_and_cancels_the_job(api, action):
    bay = worker(api)
    job = live_job(api, "PORT-7")
    claim(bay)
    body = {"to": "blocked"} if action == "move" else {}
    assert api.post(f"/api/v1/tickets/PORT-7/{action}", json=body).status_code == 200
    beat = bay.post(f"/api/v1/dispatch/jobs/{job['id']}/heartbeat", json={})
    stage = {"cancel": "cancelled", "mark_done": "done", "move": "blocked"}[action]
    assert (beat.status_code, beat.json["cancel"], beat.json["reason"]) == (200, True, f"PORT-7 is {stage}")
    assert api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["state"] == "cancelled"
    assert bay.post(f"/api/v1/dispatch/jobs/{job['id']}/heartbeat", json={}).json["cancel"] is True


# -- results and the output gate -----------------------------------------------------------------------------------


def test_changes_ready_succeeds_and_queues_the_forge_write_in_the_same_transaction(api):
    bay = worker(api)
    job = live_job(api)
    claim(bay)
    answer = bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=output(job))
    assert answer.status_code == 200, answer.text
    assert (answer.json["state"], answer.json["result"]["branch"]) == ("succeeded", "svc/port-7/work")
    assert [m.payload for m in rows("forge_write")] == [{"job_id": job["id"]}]
    ticket = api.get("/api/v1/tickets/PORT-7").json
    assert (ticket["stage"], ticket["waiting_on"], ticket["assigned_slot"]) == ("execute", None, "bay-1")
    assert ticket["timeline"][0]["kind"] == "job_succeeded"


def test_a_refused_output_is_422_naming_every_violation_fails_the_job_and_writes_nothing(api):
    bay = worker(api)
    job = live_job(api)
    claim(bay)
    bad = output(job, ticket="PORT-99", role="fixer", branch="main", files_changed=["../etc/passwd", "/etc/hosts"])
    refused = bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=bad)
    assert refused.status_code == 422 and refused.headers["content-type"] == "application/problem+json"
    paths = sorted(e["path"] for e in refused.json["errors"])
    assert paths == ["/branch", "/files_changed/0", "/files_changed/1", "/role", "/ticket"]
    assert refused.json["job"]["state"] == "failed"
    # The job keeps why, every violation named (its page shows it).
    failure = api.get(f"/api/v1/dispatch/jobs/{job['id']}").json["failure"]
    assert failure["kind"] == "output" and all(path in failure["detail"] for path in paths), failure
    assert rows("forge_write") == []
    ticket = api.get("/api/v1/tickets/PORT-7").json
    assert (ticket["waiting_on"], ticket["needs_you"]) == ("agent_failed", True)
    assert "failed" in rows("chat")[-1].payload["content"] and "PORT-7" in rows("chat")[-1].payload["content"]


def test_a_worker_that_failed_is_heard_and_no_changes_frees_the_bay(api):
    bay = worker(api)
    board(api, "PORT-7", "PORT-8")
    set_policy(api, policy(fleet_size=2))
    failed_job = queue_job(api, "PORT-7")["job_id"]
    claimed = claim(bay).json["job"]
    answer = bay.post(f"/api/v1/dispatch/jobs/{failed_job}/result", json=output(claimed, "failed"))
    assert answer.status_code == 200 and answer.json["state"] == "failed"
    assert api.get("/api/v1/tickets/PORT-7").json["waiting_on"] == "agent_failed"

    quiet = worker(api, "bay-2")
    queue_job(api, "PORT-8")
    claimed = claim(quiet, "bay-2").json["job"]
    answer = quiet.post(f"/api/v1/dispatch/jobs/{claimed['id']}/result", json=output(claimed, "no_changes"))
    assert answer.status_code == 200 and answer.json["state"] == "succeeded"
    ticket = api.get("/api/v1/tickets/PORT-8").json
    assert (ticket["waiting_on"], ticket["assigned_slot"]) == (None, None)
    assert rows("forge_write") == []


def test_ten_thousand_files_are_422_and_a_one_mebibyte_summary_413(api):
    bay = worker(api)
    job = live_job(api)
    claim(bay)
    many = output(job, files_changed=[f"src/f{n}.py" for n in range(10_000)])
    refused = bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=many)
    assert refused.status_code == 422 and [e["path"] for e in refused.json["errors"]] == ["/files_changed"]
    huge = output(job, summary="x" * (1 << 20))
    too_big = bay.post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=huge)
    assert too_big.status_code == 413 and too_big.headers["content-type"] == "application/problem+json"


# -- leases -------------------------------------------------------------------------------------------------------


def dispatch(config, clock):
    from domain.board import Board
    from domain.dispatch.jobs import Dispatch

    return Dispatch(config, clock, Board(config, clock))


def reap(config, clock) -> int:
    with connection():
        return dispatch(config, clock).reap()


def test_a_lease_that_runs_out_puts_the_job_back_then_fails_it_after_its_attempts(api, config, clock):
    import dataclasses

    config = dataclasses.replace(config, worker_lease_attempts=2)  # SVC_WORKER_LEASE_ATTEMPTS: not the retry budget
    bay = worker(api)
    board(api, "PORT-7")
    set_policy(api, policy(retry_budget=0))
    job_id = queue_job(api, "PORT-7")["job_id"]
    assert claim(bay).status_code == 200
    clock.advance(seconds=299)
    assert reap(config, clock) == 0
    clock.advance(seconds=2)
    assert reap(config, clock) == 1
    job = api.get(f"/api/v1/dispatch/jobs/{job_id}").json
    assert (job["state"], job["attempts"], job["bay"]) == ("queued", 1, None)
    assert bay.post(f"/api/v1/dispatch/jobs/{job_id}/heartbeat", json={}).status_code == 409
    ticket = api.get("/api/v1/tickets/PORT-7").json
    assert (ticket["assigned_slot"], ticket["timeline"][0]["kind"]) == (None, "job_requeued")
    assert api.get("/api/v1/slots").json["slots"][0]["ticket"] is None
    assert claim(bay).status_code == 200  # it runs again
    clock.advance(seconds=301)
    assert reap(config, clock) == 1
    job = api.get(f"/api/v1/dispatch/jobs/{job_id}").json
    assert (job["state"], job["attempts"], job["failure"]["kind"]) == ("failed", 2, "lease")
    assert api.get("/api/v1/tickets/PORT-7").json["waiting_on"] == "agent_failed"
    assert "PORT-7" in rows("chat")[-1].payload["content"]
    with connection():
        assert dispatch(config, clock).counts_by_rule() == {"coder": {"failed": 1}}


def test_a_jobs_own_claim_is_no_evidence_for_its_rule_but_a_persons_claim_is(api):
    """The scorecard counts a slot claim as the team taking a coder's work up. The claim a dispatch job makes is the
    router acting on its own decision: counted, it would make a live rule agree with itself."""
    from storage.models import ScorecardEntry

    def taken_up(decision_id: int):
        with connection():
            return ScorecardEntry.get(ScorecardEntry.decision == decision_id).taken_up_at

    job = live_job(api, "PORT-7")
    assert claim(worker(api)).status_code == 200
    assert taken_up(job["decision_id"]) is None
    created = api.post("/api/v1/tickets", json={"key": "PORT-8", "initiative_id": "portfolio", "title": "Eight"})
    assert created.status_code == 201
    other = queue_job(api, "PORT-8")
    assert other["role"] == "coder" and other["dispatched"] is False  # the fleet of one is busy with PORT-7
    assert api.post("/api/v1/slots/bay-9/claim", json={"ticket": "PORT-8"}).status_code == 200
    assert taken_up(other["id"]) is not None
