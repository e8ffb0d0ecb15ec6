"""The loop (CONTRACT.md, "The loop: a ticket follows its pull request"), through the API, the jobs process's forge
writes against a fake GitHub that answers as GitHub documents, and the forge's and CI's events: every move of the
table and the human gates; the fixer on the same pull request and `stuck`; the service's own events; the agreement,
fleet and fresh gates; each failure's shape and both retries; cancel before and after a result; the pause; a ticket
a worker is on is not needs-you. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from dispatch_kit import claim, output, policy, set_policy, worker

from domain.clock import iso
from jobs import assembly
from jobs.delivery import OutboxDeliverer
from storage.db import connection

from conftest import BASIC, CI_SECRET
from events_kit import ALLOWLIST, gate, seed_board
from router_kit import envelope, route
from servers.forges import GITHUB_TOKEN, FakeGitHub
from testclient import ApiClient

pytestmark = pytest.mark.both_backends

REPO = "acme/portfolio"
BRANCH = "svc/port-7/work"
FIRST, SECOND, THIRD, MERGE = "a" * 40, "b" * 40, "c" * 40, "d" * 40
MONA = "github:mona"  # a person on the team (on the allowlist)
CI = "github:github-actions"


@pytest.fixture
def github():
    with FakeGitHub() as fake:
        fake.add_repo(REPO, branches={BRANCH})
        yield fake


class Loop:
    """The app with live coder and fixer rules, the forge's token, and what a team and its forge do."""

    def __init__(self, api: ApiClient, config, clock, github: FakeGitHub):
        self.api, self.config, self.clock, self.github = api, config, clock, github
        self.bays: dict[str, ApiClient] = {}
        self.number = 0

    # -- people and workers -------------------------------------------------------------------------------------

    def bay(self, name: str = "bay-1") -> ApiClient:
        if name not in self.bays:
            self.bays[name] = worker(self.api, name)
        return self.bays[name]

    def ticket(self, key: str = "PORT-7") -> dict[str, Any]:
        return self.api.get(f"/api/v1/tickets/{key}").json

    def job(self, job_id: int) -> dict[str, Any]:
        return self.api.get(f"/api/v1/dispatch/jobs/{job_id}").json

    def deliver(self) -> int:
        """The jobs process drains its outbox once (forge writes, slot releases, the board's own events)."""
        handlers, recorders = assembly.outbox_handlers(self.config, self.clock)
        return OutboxDeliverer(handlers, self.clock, recorders=recorders).drain()

    # -- events ------------------------------------------------------------------------------------------------

    def event(self, document: dict[str, Any]) -> dict[str, Any]:
        self.clock.advance(seconds=1)  # each event a moment after what came before
        document["occurred_at"] = iso(self.clock())
        document["subject"]["repo"] = REPO
        return route(self.api, document)

    def coder(self, key: str = "PORT-7") -> dict[str, Any]:
        """A person moves the ticket to execute: the live coder rule queues a job."""
        return self.event(envelope("state_changed", key, actor=MONA))

    def pull_request(self, kind: str, head: str | None = None, *, sender: str = MONA, merge: str | None = None):
        document = envelope("opened", "PORT-7", actor=sender)
        to = {"opened": "open", "merged": "merged", "closed": "closed"}.get(kind)
        document["transition"] = {"kind": kind, "from": "open" if kind in ("merged", "closed") else None, "to": to}
        document["actor"]["kind"] = "human"
        document["forge"] = {"pr_number": self.number or 1, "branch": BRANCH, "head_sha": head}
        if merge:
            document["forge"]["merge_commit_sha"] = merge
        return self.event(document)

    def pipeline(self, kind: str, head: str, *, branch: str = BRANCH, key: str = "PORT-7"):
        document = envelope(kind, key, actor=CI)
        document["forge"].update(head_sha=head, branch=branch, pr_number=None if branch == "main" else 1)
        if kind == "pipeline_started":
            document["transition"] = {"kind": kind, "from": None, "to": "running"}
        return self.event(document)

    # -- the service's own work ---------------------------------------------------------------------------------

    def run_job(self, bay: str = "bay-1", *, head: str = FIRST, **changes) -> dict[str, Any]:
        """The worker of `bay` claims the next job and hands back changes on the ticket's branch (last commit
        `head`); the jobs process writes them. The job as it then is."""
        claimed = claim(self.bay(bay), bay)
        assert claimed.status_code == 200, (claimed.status_code, claimed.headers.get("Svc-Idle-Reason"))
        job = claimed.json["job"]
        document = output(job, branch=BRANCH, commits=[{"sha": head, "message": "Make the change"}], **changes)
        answer = self.bay(bay).post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=document)
        assert answer.status_code == 200, answer.text
        self.deliver()
        return self.job(job["id"])


@pytest.fixture
def loop(app_factory, config_factory, clock, github):
    config = config_factory(router_allowlist=ALLOWLIST, github_api_url=github.url, github_api_token=GITHUB_TOKEN)
    api = ApiClient(app_factory(config), basic=BASIC, ci_secret=CI_SECRET)
    seed_board(api, tickets={"PORT-7": "queued", "PORT-8": "queued"})
    set_policy(api, policy(live=("coder", "fixer")))
    return Loop(api, config, clock, github)


def kinds(loop: Loop, key: str = "PORT-7") -> list[str]:
    return [e["kind"] for e in loop.api.get(f"/api/v1/tickets/{key}/timeline?limit=100").json["entries"]]


# -- the ticket follows its pull request ---------------------------------------------------------------------------


def test_a_ticket_follows_its_pull_request_to_done_and_frees_its_bay(loop):
    decision = loop.coder()
    assert (decision["dispatched"], decision["held"]) == (True, False)
    job = loop.run_job()
    (pull,) = loop.github.pull_requests(REPO)
    (comment,) = loop.github.comments
    assert job["forge"] == {
        "state": "written",
        "pull_request": pull["html_url"],
        "comment": comment["html_url"],
        "error": None,
    }
    ticket = loop.ticket()
    assert (ticket["stage"], ticket["waiting_on"], ticket["link"], ticket["assigned_slot"]) == (
        "ci",
        "ci",
        pull["html_url"],
        "bay-1",
    )
    # The pull request the service opened comes back from the forge: it moves nothing more.
    loop.pipeline("pipeline_started", FIRST)
    assert (loop.ticket()["stage"], loop.ticket()["waiting_on"]) == ("ci", "ci")
    loop.pipeline("pipeline_passed", FIRST)
    ticket = loop.ticket()
    assert (ticket["stage"], ticket["waiting_on"], ticket["needs_you"]) == ("human_test", None, True)
    # A person's gate stays a person's: only they move it on.
    assert loop.api.post("/api/v1/tickets/PORT-7/move", json={"to": "human_merge"}).status_code == 200
    loop.pull_request("merged", FIRST, merge=MERGE)
    assert (loop.ticket()["stage"], loop.ticket()["needs_you"]) == ("ship", False)
    loop.pipeline("pipeline_passed", MERGE, branch="main")  # the base branch at the merge commit
    ticket = loop.ticket()
    assert (ticket["stage"], ticket["waiting_on"]) == ("done", None)
    loop.deliver()  # the slot steward releases the bay, as after mark_done
    assert loop.ticket()["assigned_slot"] is None
    assert {s["name"]: s["ticket"] for s in loop.api.get("/api/v1/slots").json["slots"]} == {"bay-1": None}
    assert "pull_request_moved" in kinds(loop) and "slot_released" in kinds(loop)


def test_a_new_push_takes_a_ticket_from_a_person_back_to_ci_and_an_older_head_moves_nothing(loop):
    loop.coder()
    loop.run_job()
    loop.pipeline("pipeline_passed", FIRST)
    assert loop.ticket()["stage"] == "human_test"
    loop.pipeline("pipeline_failed", FIRST)  # a re-run on the same head: the service never takes it from a person
    assert (loop.ticket()["stage"], loop.ticket()["job"]) == ("human_test", None)
    loop.pull_request("synchronized", SECOND)
    assert (loop.ticket()["stage"], loop.ticket()["waiting_on"]) == ("ci", "ci")
    loop.pipeline("pipeline_passed", FIRST)  # the old head's pipeline
    assert loop.ticket()["stage"] == "ci"
    loop.pipeline("pipeline_passed", SECOND)
    assert loop.ticket()["stage"] == "human_test"


def test_a_pull_request_closed_without_merge_blocks_its_ticket_which_needs_you(loop):
    loop.coder()
    loop.run_job()
    loop.pull_request("closed", FIRST)
    ticket = loop.ticket()
    assert (ticket["stage"], ticket["waiting_on"], ticket["needs_you"]) == ("blocked", None, True)


def test_a_teams_own_pull_request_naming_the_ticket_is_its_pull_request(loop):
    loop.api.post("/api/v1/tickets/PORT-8/move", json={"to": "execute"})
    document = envelope("opened", "PORT-8", actor=MONA)
    document["actor"]["kind"] = "human"
    document["forge"] = {"pr_number": 31, "branch": "port-8-by-hand", "head_sha": FIRST}
    loop.event(document)
    ticket = loop.ticket("PORT-8")
    assert (ticket["stage"], ticket["waiting_on"]) == ("ci", "ci")
    assert ticket["link"].endswith(f"/{REPO}/pull/31")  # where a person finds it (here: the fake GitHub's host)
    loop.pipeline("pipeline_failed", FIRST, key="PORT-8")
    ticket = loop.ticket("PORT-8")
    # A red pipeline: back to execute, and the live fixer is queued for it, so nobody is asked (a worker is on it).
    assert (ticket["stage"], ticket["waiting_on"], ticket["needs_you"]) == ("execute", "agent_failed", False)
    assert ticket["job"]["state"] == "queued"


# -- the fixer fixes the same pull request, until its budget is spent -----------------------------------------------


def test_the_fixer_comments_on_the_same_pull_request_in_the_tickets_bay_then_the_ticket_is_stuck(loop):
    loop.coder()
    loop.run_job()
    (pull,) = loop.github.pull_requests(REPO)
    red = loop.pipeline("pipeline_failed", FIRST)
    assert (red["outcome"], red["role"], red["dispatched"]) == ("would_dispatch", "fixer", True)
    again = loop.pipeline("pipeline_failed", FIRST)  # another workflow red on the same head: the same job
    assert again["job_id"] == red["job_id"]
    ticket = loop.ticket()
    assert (ticket["stage"], ticket["needs_you"], ticket["job"]) == (
        "execute",
        False,
        {"id": red["job_id"], "state": "queued"},
    )
    # PORT-7 holds bay-1: its fixer job is not there for another bay's worker.
    idle = claim(loop.bay("bay-2"), "bay-2")
    assert (idle.status_code, idle.headers["Svc-Idle-Reason"]) == (204, "nothing-queued")
    fixed = loop.run_job("bay-1", head=SECOND, comment="Fixed the failing test.")
    assert fixed["id"] == red["job_id"] and fixed["role"] == "fixer"
    assert len(loop.github.pull_requests(REPO)) == 1  # never a second pull request
    comment = loop.github.comments[-1]  # the coder's, then the fixer's
    assert (comment["number"], comment["body"]) == (pull["number"], "Fixed the failing test.")
    assert fixed["forge"]["pull_request"] == pull["html_url"] and fixed["forge"]["state"] == "written"
    assert loop.ticket()["stage"] == "ci"
    # The fixer's push is the pull request's latest head: its pipeline is matched at once.
    assert loop.pipeline("pipeline_failed", SECOND)["dispatched"] is True
    loop.run_job("bay-1", head=THIRD, comment="Fixed it again.")
    stuck = loop.pipeline("pipeline_failed", THIRD)
    assert (stuck["outcome"], stuck["dispatched"]) == ("stuck", False)
    assert gate(stuck, "retry_budget") == {
        "gate": "retry_budget",
        "passed": False,
        "reason": "2 of 2 fixer dispatches used since the last green pipeline",
    }
    ticket = loop.ticket()
    assert (ticket["stage"], ticket["needs_you"], ticket["job"]) == ("blocked", True, None)


def test_a_green_pipeline_gives_the_fixer_its_budget_again(loop):
    loop.coder()
    loop.run_job()
    loop.pipeline("pipeline_failed", FIRST)
    loop.run_job(head=SECOND)
    loop.pipeline("pipeline_failed", SECOND)
    loop.run_job(head=THIRD)
    loop.pipeline("pipeline_passed", THIRD)
    loop.pull_request("synchronized", MERGE)  # a person pushed
    red = loop.pipeline("pipeline_failed", MERGE)
    assert (red["outcome"], gate(red, "retry_budget")["reason"]) == (
        "would_dispatch",
        "0 of 2 fixer dispatches used since the last green pipeline",
    )


# -- the service's own events ------------------------------------------------------------------------------------


def test_the_services_own_events_are_own_hidden_unless_asked_for_and_take_nothing_up(loop):
    from storage.models import ScorecardEntry

    decision = loop.coder()
    loop.run_job()
    # The forge's webhook of the pull request the service opened: its sender is the service's own forge user.
    assert len(loop.github.pull_requests(REPO)) == 1
    own = loop.pull_request("opened", FIRST, sender="github:svc-bot")
    assert own["outcome"] == "own" and own["dispatched"] is False
    listed = loop.api.get("/api/v1/router/decisions?limit=500").json["decisions"]
    assert own["id"] not in {d["id"] for d in listed}
    assert all(d["outcome"] != "own" for d in listed)
    everything = loop.api.get("/api/v1/router/decisions?limit=500&include=own").json["decisions"]
    assert own["id"] in {d["id"] for d in everything}
    # The board's own events of the claim, the result and the pull request are the service's too.
    loop.deliver()
    everything = loop.api.get("/api/v1/router/decisions?limit=500&include=own").json["decisions"]
    svc = [d for d in everything if d["source"] == "svc" and d["envelope"]["actor"]["kind"] in ("system", "agent")]
    assert svc and all(d["outcome"] == "own" for d in svc)
    people = [d for d in everything if d["source"] == "svc" and d["envelope"]["actor"]["kind"] == "human"]
    assert people and all(d["outcome"] != "own" for d in people)  # a person's move stays evidence
    assert [d["id"] for d in loop.api.get("/api/v1/router/decisions?outcome=own&limit=500").json["decisions"]] == [
        d["id"] for d in everything if d["outcome"] == "own"
    ]
    # The coder's decision was not taken up by the service agreeing with itself...
    with connection():
        assert ScorecardEntry.get(ScorecardEntry.decision == decision["id"]).taken_up_at is None
    # ...but a person's push about the ticket takes it up.
    loop.pull_request("synchronized", SECOND)
    with connection():
        assert ScorecardEntry.get(ScorecardEntry.decision == decision["id"]).taken_up_at is not None


def test_the_scorecard_of_a_live_rule_does_not_rise_because_the_service_agreed_with_itself(loop):
    loop.coder()
    loop.run_job()
    loop.pull_request("opened", FIRST, sender="github:svc-bot")  # the service's own pull request, come back
    loop.clock.advance(days=2)
    coder = loop.api.get("/api/v1/router/scorecard").json["rules"]["coder"]
    assert (coder["confirmed"], coder["not_taken_up"], coder["agreement"]["rate"]) == (0, 1, 0.0)


# -- gates ----------------------------------------------------------------------------------------------------------


def test_a_ticket_still_in_agreement_is_not_dispatched(loop):
    loop.api.post("/api/v1/tickets", json={"key": "PORT-9", "initiative_id": "portfolio", "title": "Nine"})
    decision = loop.coder("PORT-9")
    assert (decision["outcome"], decision["dispatched"]) == ("blocked", False)
    assert gate(decision, "agreement")["reason"] == "PORT-9 is itself still in agreement"


def test_the_fleet_gate_and_the_claim_count_the_jobs_running(loop):
    first = loop.coder("PORT-7")
    claim(loop.bay(), "bay-1")
    second = loop.coder("PORT-8")
    assert (second["outcome"], gate(second, "fleet")["reason"]) == ("blocked", "1 job(s) running; fleet size 1")
    assert (first["facts"]["jobs_running"], second["facts"]["jobs_running"]) == (0, 1)


def test_an_event_older_than_the_max_age_is_routed_and_never_dispatched(loop):
    late = envelope("state_changed", "PORT-7", actor=MONA, at=loop.clock())
    loop.clock.advance(seconds=loop.config.dispatch_max_age_seconds + 60)
    decision = route(loop.api, late)
    assert (decision["outcome"], decision["role"], decision["dispatched"]) == ("blocked", "coder", False)
    assert gate(decision, "fresh") == {
        "gate": "fresh",
        "passed": False,
        "reason": "61 min old, older than 60 min (SVC_DISPATCH_MAX_AGE_SECONDS)",
    }
    assert decision["facts"]["age_seconds"] == loop.config.dispatch_max_age_seconds + 60
    assert loop.api.get("/api/v1/dispatch/jobs").json["jobs"] == []


# -- failures are loud and recoverable ------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"not json at all", b"", b"[1, 2]"])
def test_a_result_that_is_not_a_json_object_is_bad_output_and_fails_the_job(loop, body):
    loop.coder()
    job = claim(loop.bay(), "bay-1").json["job"]
    answer = loop.bay().post(
        f"/api/v1/dispatch/jobs/{job['id']}/result", body=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 422 and answer.json["type"].endswith("/bad-output")
    failed = loop.job(job["id"])
    assert (failed["state"], failed["failure"]["kind"]) == ("failed", "output")
    assert failed["failure"]["detail"].endswith(body.decode()) if body else "empty" in failed["failure"]["detail"]
    assert (loop.ticket()["waiting_on"], loop.ticket()["needs_you"]) == ("agent_failed", True)
    # It is over: the same result again is 409, and nothing was queued for the forge.
    again = loop.bay().post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=output(job))
    assert again.status_code == 409


def test_a_branch_never_pushed_fails_the_forge_write_loudly_and_a_retry_writes_it(loop):
    loop.coder()
    claimed = claim(loop.bay(), "bay-1").json["job"]
    unpushed = output(claimed, branch="svc/port-7/unpushed", commits=[{"sha": FIRST, "message": "m"}])
    assert loop.bay().post(f"/api/v1/dispatch/jobs/{claimed['id']}/result", json=unpushed).status_code == 200
    loop.deliver()
    job = loop.job(claimed["id"])
    # GitHub's 422: {"message": "Validation Failed", "errors": [{"resource": "PullRequest", "field": "head", ...}]}
    assert (job["state"], job["forge"]["state"], job["failure"]["kind"]) == ("succeeded", "failed", "forge")
    assert "Validation Failed" in job["forge"]["error"] and "head: invalid" in job["forge"]["error"]
    ticket = loop.ticket()
    assert (ticket["stage"], ticket["waiting_on"], ticket["needs_you"]) == ("execute", "forge_failed", True)
    assert "forge_failed" in kinds(loop)
    # Not failed: nothing to retry. Failed: 202, queued again, and once the branch is there, written.
    other = loop.api.post(f"/api/v1/dispatch/jobs/{claimed['id']}/retry", json={})
    assert other.status_code == 409  # the job itself succeeded: its forge write is what is retried
    loop.github.push(REPO, "svc/port-7/unpushed")
    retried = loop.api.post(f"/api/v1/dispatch/jobs/{claimed['id']}/forge/retry", json={})
    assert retried.status_code == 202 and retried.json["forge"]["state"] == "pending"
    assert loop.api.post(f"/api/v1/dispatch/jobs/{claimed['id']}/forge/retry", json={}).status_code == 409
    loop.deliver()
    job = loop.job(claimed["id"])
    assert job["forge"]["state"] == "written" and job["forge"]["error"] is None
    assert (loop.ticket()["stage"], loop.ticket()["waiting_on"]) == ("ci", "ci")


def test_a_failed_job_runs_again_as_a_new_job_once_nothing_else_waits(loop):
    loop.coder()
    job = claim(loop.bay(), "bay-1").json["job"]
    loop.bay().post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=output(job, "failed"))
    again = loop.api.post(f"/api/v1/dispatch/jobs/{job['id']}/retry", json={})
    assert again.status_code == 201, again.text
    made = again.json
    assert (made["state"], made["retry_of"], made["decision_id"], made["role"]) == (
        "queued",
        job["id"],
        job["decision_id"],
        "coder",
    )
    assert again.headers["Location"] == f"/api/v1/dispatch/jobs/{made['id']}"
    assert loop.ticket()["job"] == {"id": made["id"], "state": "queued"}
    assert loop.api.post(f"/api/v1/dispatch/jobs/{job['id']}/retry", json={}).status_code == 409  # one waits
    loop.api.post(f"/api/v1/dispatch/jobs/{made['id']}/cancel", json={})
    loop.api.post("/api/v1/tickets/PORT-7/cancel", json={})
    finished = loop.api.post(f"/api/v1/dispatch/jobs/{made['id']}/retry", json={})
    assert finished.status_code == 409 and finished.json["current_stage"] == "cancelled"


# -- cancel, before and after a result ------------------------------------------------------------------------------


def test_a_cancelled_ticket_cancels_its_job_at_once_and_its_result_writes_nothing(loop):
    loop.coder()
    job = claim(loop.bay(), "bay-1").json["job"]
    assert loop.api.post("/api/v1/tickets/PORT-7/cancel", json={}).status_code == 200
    cancelled = loop.job(job["id"])
    assert (cancelled["state"], cancelled["failure"]) == (
        "cancelled",
        {"kind": "cancelled", "detail": "PORT-7 is cancelled"},
    )
    beat = loop.bay().post(f"/api/v1/dispatch/jobs/{job['id']}/heartbeat", json={})
    assert (beat.json["cancel"], beat.json["reason"]) == (True, "PORT-7 is cancelled")
    late = loop.bay().post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=output(job, branch=BRANCH))
    assert late.status_code == 409
    loop.deliver()
    assert loop.github.written() == []


def test_a_ticket_finished_after_the_result_drops_its_forge_write(loop):
    loop.coder()
    job = claim(loop.bay(), "bay-1").json["job"]
    loop.bay().post(f"/api/v1/dispatch/jobs/{job['id']}/result", json=output(job, branch=BRANCH))
    assert loop.api.post("/api/v1/tickets/PORT-7/mark_done", json={}).status_code == 200
    loop.deliver()
    written = loop.job(job["id"])
    assert (written["state"], written["forge"]["state"]) == ("succeeded", "dropped")
    assert "PORT-7 is done" in written["forge"]["error"]
    assert loop.github.written() == []


# -- the pause holds everything --------------------------------------------------------------------------------------


def test_the_pause_holds_jobs_and_writes_and_resume_lets_them_go_oldest_first(loop):
    def switch(paused: bool):
        body = {"paused": paused, "reason": "a release is going out" if paused else "done"}
        assert loop.api.put("/api/v1/router/dispatch", json=body).status_code == 200

    set_policy(loop.api, policy(live=("coder", "fixer"), fleet_size=2))
    loop.coder("PORT-7")
    running = claim(loop.bay(), "bay-1").json["job"]
    switch(True)
    held = loop.coder("PORT-8")
    assert (held["dispatched"], held["held"]) == (False, True)
    assert loop.job(held["job_id"])["state"] == "held"
    idle = claim(loop.bay("bay-2"), "bay-2")
    assert (idle.status_code, idle.headers["Svc-Idle-Reason"]) == (204, "paused")
    # The running job may finish; its write waits.
    done = output(running, branch=BRANCH, commits=[{"sha": FIRST, "message": "m"}])
    assert loop.bay().post(f"/api/v1/dispatch/jobs/{running['id']}/result", json=done).json["forge"]["state"] == "held"
    loop.deliver()
    assert loop.github.written() == []
    switch(False)
    assert loop.job(held["job_id"])["state"] == "queued"
    assert loop.job(running["id"])["forge"]["state"] == "pending"
    loop.deliver()
    assert loop.job(running["id"])["forge"]["state"] == "written" and len(loop.github.pull_requests(REPO)) == 1
    assert claim(loop.bay("bay-2"), "bay-2").json["job"]["id"] == held["job_id"]


def test_a_held_job_can_be_cancelled(loop):
    assert loop.api.put("/api/v1/router/dispatch", json={"paused": True, "reason": "wait"}).status_code == 200
    held = loop.coder()
    cancelled = loop.api.post(f"/api/v1/dispatch/jobs/{held['job_id']}/cancel", json={})
    assert cancelled.status_code == 200 and cancelled.json["state"] == "cancelled"


# -- what the board says of a ticket a worker is on ----------------------------------------------------------------


def test_a_ticket_with_a_job_on_it_is_not_needs_you_and_says_which_job(loop):
    loop.api.post("/api/v1/tickets/PORT-7/move", json={"to": "execute", "waiting_on": "agent_failed"})
    assert loop.ticket()["needs_you"] is True
    loop.api.post("/api/v1/tickets/PORT-7/move", json={"to": "queued"})
    decision = loop.coder()
    ticket = loop.ticket()
    assert ticket["job"] == {"id": decision["job_id"], "state": "queued"} and ticket["needs_you"] is False
    claim(loop.bay(), "bay-1")
    ticket = loop.ticket()
    assert (ticket["waiting_on"], ticket["needs_you"], ticket["job"]["state"]) == ("agent", False, "running")
    listed = loop.api.get("/api/v1/tickets?needs_you=true").json["tickets"]
    assert "PORT-7" not in {t["key"] for t in listed}
    board = loop.api.get("/", headers={"Accept": "text/html"}).text
    assert f"a worker is on it: job {decision['job_id']}" in board


# -- the record-only switch ---------------------------------------------------------------------------------------


def test_a_record_only_event_is_recorded_and_acts_on_nothing(loop):
    from domain.services import build_services

    router = build_services(loop.config, loop.clock).router
    with connection():
        receipt = router.receive(envelope("state_changed", "PORT-7", actor=MONA, at=loop.clock()), record_only=True)
    assert (receipt.decision.outcome, receipt.decision.dispatched, receipt.decision.job_id) == (
        "would_dispatch",
        False,
        None,
    )
    assert loop.api.get("/api/v1/dispatch/jobs").json["jobs"] == []
    assert loop.ticket()["stage"] == "queued"


# -- job ids ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ident", [" 1", "%201", "\u0661", "+1", "1.0", "0"])
def test_a_job_id_that_is_not_ascii_digits_is_no_job(loop, ident):
    loop.coder()
    for path in (f"/api/v1/dispatch/jobs/{ident}", f"/jobs/{ident}"):
        assert loop.api.get(path).status_code == 404, path
