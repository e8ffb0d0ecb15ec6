"""The worker boundary, over HTTP: a worker keeps to its own bay and to one job at a time, and an account removed and
added again is another principal, to which its predecessor's jobs do not belong. `GET dispatch/workers` lists each
worker's bay, job and when it was last heard; a refusal is kept for the board. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from dispatch_kit import WORKER_PASSWORD, board, claim, output, policy, queue_job, set_policy, worker

from domain import accounts
from domain.clock import iso
from storage.db import connection
from storage.models import Account

from conftest import PASSWORDS
from router_kit import allowlisted
from testclient import ApiClient

pytestmark = pytest.mark.both_backends


@pytest.fixture
def api(app_factory, config_factory):
    return allowlisted(app_factory, config_factory)


def queued(api, *keys: str, fleet_size: int = 1) -> list[int]:
    """A live coder rule and one queued job per ticket; their ids."""
    board(api, *keys)
    set_policy(api, policy(fleet_size=fleet_size))
    ids = []
    for key in keys:
        decision = queue_job(api, key)
        assert decision["dispatched"] is True, decision
        ids.append(decision["job_id"])
    return ids


def job(api, ident: int) -> dict:
    return api.get(f"/api/v1/dispatch/jobs/{ident}").json


def account(name: str) -> Account:
    with connection():
        return Account.get(Account.name == name)


def test_a_claim_into_another_workers_bay_is_403_and_takes_nothing(api):
    (ident,) = queued(api, "PORT-7")
    worker(api, "bay-2")
    one = worker(api, "bay-1")
    refused = claim(one, "bay-2")
    assert refused.status_code == 403, refused.text
    assert "bay-1" in refused.json["detail"] and "bay-2" in refused.json["detail"]
    assert (job(api, ident)["state"], job(api, ident)["bay"]) == ("queued", None)
    assert api.get("/api/v1/slots").json["slots"] == []
    ticket = api.get("/api/v1/tickets/PORT-7").json
    assert (ticket["stage"], ticket["assigned_slot"], len(ticket["timeline"])) == ("queued", None, 1)
    assert account("bay-1").refusal == refused.json["detail"]
    assert claim(one, "bay-1").status_code == 200


def test_a_worker_added_with_a_bay_claims_into_that_bay_only(api):
    (ident,) = queued(api, "PORT-7")
    machine = worker(api, "runner-a", bay="bay-9")
    assert claim(machine, "runner-a").status_code == 403
    taken = claim(machine, "bay-9")
    assert taken.status_code == 200 and taken.json["job"]["id"] == ident and taken.json["job"]["bay"] == "bay-9"


def test_a_second_claim_while_running_is_409_before_any_204(api):
    first, second = queued(api, "PORT-7", "PORT-8", fleet_size=2)
    one = worker(api, "bay-1")
    assert claim(one).json["job"]["id"] == first
    again = claim(one)
    assert again.status_code == 409 and f"job {first}" in again.json["detail"]
    assert job(api, second)["state"] == "queued"
    # Paused (a 204 for anyone else), the worker that holds a running job is still told why it may not claim.
    assert api.put("/api/v1/router/dispatch", json={"paused": True, "reason": "a test pauses"}).status_code == 200
    assert claim(one).status_code == 409
    assert api.put("/api/v1/router/dispatch", json={"paused": False}).status_code == 200
    # Its result handed back, it claims the next.
    handed = one.post(f"/api/v1/dispatch/jobs/{first}/result", json=output(job(api, first), "no_changes"))
    assert handed.status_code == 200, handed.text
    assert claim(one).json["job"]["id"] == second


def test_two_workers_racing_for_three_jobs_take_one_each_within_the_fleet(api):
    queued(api, "PORT-7", "PORT-8", "PORT-9", fleet_size=3)
    one, two = worker(api, "bay-1"), worker(api, "bay-2")
    answers = [claim(one, "bay-1"), claim(one, "bay-2"), claim(one, "bay-3"), claim(two, "bay-2"), claim(two, "bay-2")]
    assert [a.status_code for a in answers] == [200, 403, 403, 200, 409]
    running = api.get("/api/v1/dispatch/jobs?state=running").json["jobs"]
    assert sorted((j["worker"], j["bay"]) for j in running) == [("bay-1", "bay-1"), ("bay-2", "bay-2")]


def test_an_account_removed_and_added_again_is_another_principal(api):
    (ident,) = queued(api, "PORT-7", fleet_size=2)
    before = worker(api, "bay-1")
    held = claim(before).json["job"]
    assert before.post(f"/api/v1/dispatch/jobs/{ident}/heartbeat", json={}).status_code == 200
    accounts.remove("bay-1")
    accounts.add("bay-1", "worker", WORKER_PASSWORD, passwords=PASSWORDS)
    after = ApiClient(api.client.app, basic=f"bay-1:{WORKER_PASSWORD}", ci_secret="")
    beat = after.post(f"/api/v1/dispatch/jobs/{ident}/heartbeat", json={})
    assert beat.status_code == 409 and "earlier account" in beat.json["detail"]
    result = after.post(f"/api/v1/dispatch/jobs/{ident}/result", json=output(held))
    assert result.status_code == 409
    assert after.get(f"/api/v1/dispatch/jobs/{ident}").status_code == 409
    listed = job(api, ident)
    assert (listed["state"], listed["result"]) == ("running", None)
    # Not its job, so not its running job either: it may claim (there is nothing else queued).
    assert claim(after).status_code == 204


def test_the_workers_list_says_each_ones_bay_job_and_when_it_was_last_heard(api, clock):
    (ident,) = queued(api, "PORT-7")
    one = worker(api, "bay-1")
    worker(api, "runner-b", bay="bay-2")
    accounts.add("ada", "operator", "operator-password", passwords=PASSWORDS)
    assert api.get("/api/v1/dispatch/workers").json == {
        "workers": [
            {"account": "bay-1", "bay": "bay-1", "job": None, "last_heard_at": None},
            {"account": "runner-b", "bay": "bay-2", "job": None, "last_heard_at": None},
        ],
        "next": None,
    }
    claim(one)
    listed = api.get("/api/v1/dispatch/workers?limit=1").json
    assert listed["workers"] == [{"account": "bay-1", "bay": "bay-1", "job": ident, "last_heard_at": iso(clock())}]
    rest = api.get(f"/api/v1/dispatch/workers?limit=1&cursor={listed['next']}").json
    assert [w["account"] for w in rest["workers"]] == ["runner-b"] and rest["next"] is None
    # A worker reads no one's list but its own jobs'.
    assert one.get("/api/v1/dispatch/workers").status_code == 403


def test_the_bays_panel_shows_each_worker_and_one_being_refused_says_why(api, clock):
    import html
    import re

    (ident,) = queued(api, "PORT-7")
    one = worker(api, "bay-1")
    worker(api, "bay-2")
    seen = api.get("/")
    assert claim(one, "bay-2").status_code == 403
    page = api.get("/", headers={"If-None-Match": seen.headers["ETag"]})
    assert page.status_code == 200  # not 304: a refusal changes the board

    def row(name: str) -> str:
        found = re.search(rf'<li class="worker[^"]*" id="worker-{name}".*?</li>', page.text, re.S).group(0)
        return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", found))).strip(), found

    words, raw = row("bay-1")
    assert 'class="worker refused"' in raw and "being refused" in words and "claims jobs into its own bay" in words
    assert "bay bay-1" in words and "no job" in words
    words, raw = row("bay-2")
    assert "refused" not in raw and "never heard" in words
    clock.advance(minutes=2)
    assert claim(one).status_code == 200
    page = api.get("/")
    words, raw = row("bay-1")
    assert "refused" not in raw and f"running job {ident} for PORT-7" in words and "last heard" in words
