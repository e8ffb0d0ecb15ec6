"""Dispatch on the web board, as a person reads it: the bays panel names the job running in each bay with how long it
has run and its worker's last heartbeat; the queue lists the queued jobs in the order claims take them; a job's page
says its decision, state, bay, worker, times, its output, what was written to the forge and why anything was
refused, with a Cancel control for an operator; the ticket's timeline links each job entry to its page; the
scorecard counts each live rule's jobs by state; a decision says its mode and links to the job it queued."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from dispatch_kit import board, claim, output, policy, queue_job, set_policy, worker

from domain.clock import iso
from storage.db import connection

from conftest import PASSWORDS
from router_kit import allowlisted
from testclient import ApiClient


@pytest.fixture
def api(app_factory, config_factory):
    return allowlisted(app_factory, config_factory)


def live(api, *keys: str, fleet_size: int = 1) -> list[int]:
    """Tickets `keys` on the board, the coder rule live, and one job queued for each, in that order; their ids."""
    board(api, *keys)
    set_policy(api, policy(fleet_size=fleet_size))
    return [queue_job(api, key)["job_id"] for key in keys]


def text_of(html: str) -> str:
    """The page's words, tags dropped and spaces folded: what a person reads."""
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def section(html: str, ident: str) -> str:
    found = re.search(rf'<(section|li|article)[^>]* id="{ident}".*?</\1>', html, re.S)
    assert found, f"no #{ident} on the page"
    return found.group(0)


def viewer(api) -> ApiClient:
    from domain import accounts

    from conftest import CI_SECRET

    accounts.add("vera", "viewer", "vera-password-1", passwords=PASSWORDS)
    return ApiClient(api.client.app, basic="vera:vera-password-1", ci_secret=CI_SECRET)


# -- the board: the bays panel and the queue -----------------------------------------------------------------------


def test_the_queue_lists_the_queued_jobs_oldest_first_with_their_ticket_role_rule_and_age(api, clock):
    first, second = live(api, "PORT-7", "PORT-8")
    clock.advance(minutes=5)
    queue = section(api.get("/").text, "queue")
    assert re.findall(r'data-job="(\d+)"', queue) == [str(first), str(second)]
    words = text_of(section(queue, f"queued-job-{first}"))
    assert f"job {first}" in words and "coder for PORT-7" in words and "rule coder" in words
    assert "queued 5 minutes ago" in words and "first attempt" in words
    assert f'href="/jobs/{first}"' in queue
    assert "Queue 2" in text_of(queue)


def test_a_claimed_job_leaves_the_queue_and_its_bay_names_it_with_its_last_heartbeat(api, clock):
    (job_id,) = live(api, "PORT-7")
    bay = worker(api)
    claimed_at = clock()
    assert claim(bay).status_code == 200
    clock.advance(seconds=100)
    assert bay.post(f"/api/v1/dispatch/jobs/{job_id}/heartbeat", json={}).status_code == 200
    clock.advance(seconds=80)
    html = api.get("/").text
    assert "No job is queued." in section(html, "queue")
    shown = section(html, "bay-bay-1")
    words = text_of(shown)
    assert f"coder job {job_id} running for PORT-7" in words
    assert f"job {job_id} (coder) by bay-1" in words and "running for 3 minutes" in words
    # The last heartbeat is the lease's end less the lease (no column keeps it): 100 s after the claim.
    beat = re.search(r'last heartbeat <time datetime="([^"]+)"', shown).group(1)
    assert beat == iso(claimed_at + timedelta(seconds=100))
    assert "last heartbeat 1 minute ago" in words
    assert f'href="/jobs/{job_id}"' in shown


def test_a_new_job_moves_the_boards_etag(api):
    board(api, "PORT-7")
    set_policy(api, policy())
    first = api.get("/")
    assert api.get("/", headers={"If-None-Match": first.headers["ETag"]}).status_code == 304
    queue_job(api, "PORT-7")
    again = api.get("/", headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 200 and "coder for PORT-7" in text_of(again.text)


# -- a job's page -------------------------------------------------------------------------------------------------


def test_a_queued_jobs_page_says_its_decision_and_offers_an_operator_cancel(api):
    (job_id,) = live(api, "PORT-7")
    decision_id = api.get(f"/api/v1/dispatch/jobs/{job_id}").json["decision_id"]
    html = api.get(f"/jobs/{job_id}").text
    words = text_of(html)
    assert f"Job {job_id}: coder for PORT-7" in words
    assert "queued: waiting for a worker's claim" in words
    assert f'<a href="/decisions/{decision_id}">decision #{decision_id}</a>' in html
    assert "dispatched coder" in words and "live mode" in words
    assert "Worker none yet" in words and "Bay none yet" in words
    assert f'data-endpoint="/api/v1/dispatch/jobs/{job_id}/cancel"' in html
    assert f"Cancel job {job_id}" in words
    # A viewer reads the same page with no control on it.
    seen = viewer(api).get(f"/jobs/{job_id}").text
    assert f"Job {job_id}: coder for PORT-7" in text_of(seen)
    assert "<form" not in seen and "<button" not in seen


def test_a_refused_output_says_why_and_that_nothing_reached_the_forge(api):
    (job_id,) = live(api, "PORT-7")
    bay = worker(api)
    job = claim(bay).json["job"]
    bad = output(job, branch="main", files_changed=["../etc/passwd"])
    assert bay.post(f"/api/v1/dispatch/jobs/{job_id}/result", json=bad).status_code == 422
    html = api.get(f"/jobs/{job_id}").text
    words = text_of(html)
    assert "✗ failed" in words
    why = text_of(section(html.replace('<section class="job-why"', '<section id="why" class="job-why"'), "why"))
    assert "Why it failed" in why and "the output gate refused its output" in why
    assert "/branch" in why and "/files_changed/0" in why
    assert "Nothing was written to the forge for this job." in why
    # The output itself, readably, as the worker sent it.
    assert "Branch main" in words and "../etc/passwd" in words and "Status changes_ready" in words
    assert "Cancel job" not in words  # a finished job offers no cancel


def test_an_accepted_output_reads_as_words_and_then_what_the_forge_wrote(api, config, clock):
    (job_id,) = live(api, "PORT-7")
    bay = worker(api)
    job = claim(bay).json["job"]
    assert bay.post(f"/api/v1/dispatch/jobs/{job_id}/result", json=output(job)).status_code == 200
    html = api.get(f"/jobs/{job_id}").text
    words = text_of(html)
    assert "✓ succeeded" in words
    assert "Summary Made the change the ticket asks for." in words
    assert "Branch svc/port-7/work" in words and "aaaaaaaaaaaa Make the change" in words
    assert "src/app.py" in words and "PORT-7: the change" in words and "What it does and why." in words
    assert "The change is ready for review." in words
    assert "the draft pull request and the comment are queued" in words
    # What the jobs process then writes (`domain/dispatch/forge.py`): the pull request and the comment, each a link;
    # the ticket's timeline says so, and its link is the pull request.
    pull = "https://github.com/acme/portfolio/pull/12"
    forge_wrote(config, clock, job_id, pull)
    html = api.get(f"/jobs/{job_id}").text
    assert f'<a class="forge-link" href="{pull}" rel="noopener">{pull}</a>' in html
    assert f'href="{pull}#issuecomment-1"' in html
    assert "queued; the jobs process" not in html
    ticket = api.get("/tickets/PORT-7").text
    newest = re.search(r'<li class="entry tone-(\w+)" data-kind="(\w+)".*?</li>', ticket, re.S)
    assert newest.group(1, 2) == ("ok", "pull_request")
    assert "Draft pull request opened" in text_of(newest.group(0))
    assert f'<a class="forge-link" href="{pull}" rel="noopener">{pull}</a>' in newest.group(0)
    assert f'<a class="job-link" href="/jobs/{job_id}">job {job_id}</a>' in newest.group(0)
    assert "Pull request" in text_of(re.search(r'<dl class="facts">.*?</dl>', ticket, re.S).group(0))


def forge_wrote(config, clock, job_id: int, pull: str) -> None:
    """What the jobs process records once the forge answered: the pull request (and its timeline entry), the comment."""
    from domain.board import Board
    from domain.dispatch.forge import ForgePlan, ForgeWrites
    from integrations.forges import ChangeRequest
    from storage.db import connection

    plan = ForgePlan(
        job_id=job_id,
        ticket="PORT-7",
        role="coder",
        forge="github",
        repo="acme/portfolio",
        branch="svc/port-7/work",
        title="PORT-7: the change",
        body="What it does and why.",
        comment="The change is ready for review.",
        head_sha="a" * 40,
        pull_request=None,
        number=None,
        commented=False,
    )
    writes = ForgeWrites(config, clock, Board(config, clock))
    with connection():
        writes.pull_request_known(plan, ChangeRequest(12, pull, created=True))
        writes.comment_written(plan, url=pull + "#issuecomment-1")
        writes.written(job_id)


def test_an_unknown_job_is_a_page_saying_so(api):
    for ident in ("999", "nope"):
        answer = api.get(f"/jobs/{ident}")
        assert answer.status_code == 404
        assert f"No job {ident}" in text_of(answer.text)


# -- the ticket's timeline, the scorecard and the decisions -------------------------------------------------------


def test_the_tickets_timeline_reads_the_claim_and_the_result_with_a_link_to_the_job(api):
    (job_id,) = live(api, "PORT-7")
    bay = worker(api)
    job = claim(bay).json["job"]
    bay.post(f"/api/v1/dispatch/jobs/{job_id}/result", json=output(job))
    html = api.get("/tickets/PORT-7").text
    kinds = re.findall(r'<li class="entry tone-(\w+)" data-kind="(\w+)"', html)
    assert kinds[:2] == [("ok", "job_succeeded"), ("info", "job_claimed")]
    claimed = text_of(re.search(r'data-kind="job_claimed".*?</li>', html, re.S).group(0))
    assert "Job claimed by a worker" in claimed and "by bay-1" in claimed
    assert f"dispatch job job {job_id}" in claimed and "bay bay-1" in claimed and "queued → execute" in claimed
    done = re.search(r'data-kind="job_succeeded".*?</li>', html, re.S).group(0)
    assert "Job done: changes ready" in text_of(done) and "queued for the forge" in text_of(done)
    assert f'<a class="job-link" href="/jobs/{job_id}">job {job_id}</a>' in done


def test_the_scorecard_counts_each_live_rules_jobs_by_state(api):
    first, second, _third = live(api, "PORT-7", "PORT-8", "PORT-9")
    api.post(f"/api/v1/dispatch/jobs/{first}/cancel", json={})
    bay = worker(api)
    assert claim(bay).json["job"]["id"] == second
    table = re.search(r'<table class="scorecard" id="scorecard-jobs">.*?</table>', api.get("/decisions").text, re.S)
    assert table, "no table of the live rules' jobs"
    cells = dict(re.findall(r'<td data-state="(\w+)">(?:<a [^>]*>)?(\d+)', table.group(0)))
    assert cells == {"queued": "1", "held": "0", "running": "1", "succeeded": "0", "failed": "0", "cancelled": "1"}
    assert re.findall(r'<tr data-rule="(\w+)">', table.group(0)) == ["coder"]


def test_under_shadow_rules_the_scorecard_has_no_jobs_table(api):
    assert 'id="scorecard-jobs"' not in api.get("/decisions").text


def test_a_decision_says_its_mode_and_links_to_the_job_it_queued(api):
    board(api, "PORT-7", "PORT-8")
    shadow = queue_job(api, "PORT-8")
    set_policy(api, policy())
    dispatched = queue_job(api, "PORT-7")
    html = api.get("/decisions").text
    line = re.search(rf'<li class="decision line[^"]*" id="decision-{dispatched["id"]}".*?</li>', html, re.S).group(0)
    assert "dispatched coder" in text_of(line) and ">live<" in line
    assert f'<a class="decision-job" href="/jobs/{dispatched["job_id"]}">job {dispatched["job_id"]}</a>' in line
    other = re.search(rf'<li class="decision line[^"]*" id="decision-{shadow["id"]}".*?</li>', html, re.S).group(0)
    assert "would dispatch coder" in text_of(other) and ">live<" not in other and "decision-job" not in other
    page = api.get(f"/decisions/{dispatched['id']}").text
    assert "live mode" in text_of(page) and f'href="/jobs/{dispatched["job_id"]}"' in page
    assert "mode shadow" in text_of(api.get(f"/decisions/{shadow['id']}").text)


def test_every_kind_of_job_entry_reads_in_words_on_its_tickets_timeline(api, config, clock):
    """A refused output, a cancel, a lease that ran out and the pull request the jobs process opened: each kind of
    entry a job writes on its ticket (the demo tells no dispatch story) reads in words, with a link to its job."""
    from domain.board import Board
    from domain.dispatch.forge import ForgeWrites
    from domain.dispatch.jobs import Dispatch
    from storage.db import connection

    from router_kit import envelope, route

    failed, cancelled = live(api, "PORT-7", "PORT-8", fleet_size=3)
    body = {"key": "PORT-9", "initiative_id": "portfolio", "title": "Nine", "stage": "queued"}
    assert api.post("/api/v1/tickets", json=body).status_code == 201
    event = envelope("state_changed", "PORT-9")
    event["subject"]["repo"] = "acme/portfolio"  # where its pull request goes
    lapsed = route(api, event)["job_id"]
    bays = [worker(api, f"bay-{n}") for n in (1, 2, 3)]
    claims = [claim(bay, f"bay-{n}") for n, bay in enumerate(bays, 1)]
    assert [c.status_code for c in claims] == [200, 200, 200], [c.text for c in claims]
    jobs = [c.json["job"] for c in claims]
    bays[0].post(f"/api/v1/dispatch/jobs/{failed}/result", json=output(jobs[0], branch="main"))
    api.post(f"/api/v1/dispatch/jobs/{cancelled}/cancel", json={"reason": "not now"})
    clock.advance(seconds=config.worker_lease_seconds + 1)
    with connection():
        assert Dispatch(config, clock, Board(config, clock)).reap() == 1
    again = claim(bays[2], "bay-3").json["job"]  # its bay was freed with the lease
    assert again["id"] == lapsed
    assert bays[2].post(f"/api/v1/dispatch/jobs/{lapsed}/result", json=output(again)).status_code == 200
    from integrations.forges import ChangeRequest, GitHubForge

    writes = ForgeWrites(config, clock, Board(config, clock))
    forges = {"github": GitHubForge("https://github.invalid", "a-token")}  # a forge to plan for: nothing is called
    plan = writes.begin(lapsed, forges=forges)
    writes.pull_request_known(plan, ChangeRequest(12, "https://github.com/acme/portfolio/pull/12", created=True))

    expected = {"PORT-7": ("job_failed", failed), "PORT-8": ("job_cancelled", cancelled)}
    expected |= {"PORT-9": ("job_requeued", lapsed)}
    for key, (kind, job_id) in expected.items():
        entry = re.search(rf'data-kind="{kind}".*?</li>', api.get(f"/tickets/{key}").text, re.S)
        assert entry, f"no {kind} entry on {key}'s timeline"
        assert f'href="/jobs/{job_id}"' in entry.group(0) and len(text_of(entry.group(0)).split()) >= 4
    pull = re.search(r'data-kind="pull_request".*?</li>', api.get("/tickets/PORT-9").text, re.S)
    assert pull and 'href="https://github.com/acme/portfolio/pull/12"' in pull.group(0)
    assert f'href="/jobs/{lapsed}"' in pull.group(0)


def test_an_operator_may_run_a_failed_job_again_and_retry_its_failed_forge_write_from_its_page(api):
    (job_id,) = live(api, "PORT-7")
    bay = worker(api)
    job = claim(bay).json["job"]
    bay.post(f"/api/v1/dispatch/jobs/{job_id}/result", json=output(job, "failed"))
    html = api.get(f"/jobs/{job_id}").text
    assert f'data-endpoint="/api/v1/dispatch/jobs/{job_id}/retry"' in html and "Run again" in html
    assert "the worker said it failed" in text_of(html) and 'class="failure-kind" data-kind="worker"' in html
    assert "Its forge write: nothing to write" in text_of(html) and "forge/retry" not in html
    again = api.post(f"/api/v1/dispatch/jobs/{job_id}/retry", json={}).json
    html = api.get(f"/jobs/{again['id']}").text
    assert f'It runs job <a href="/jobs/{job_id}">{job_id}</a> again.' in html
    from storage.models import DispatchJob

    with connection():
        DispatchJob.update(state="succeeded", forge_state="failed", failure_kind="forge").where(
            DispatchJob.id == job_id
        ).execute()
    html = api.get(f"/jobs/{job_id}").text
    assert f'data-endpoint="/api/v1/dispatch/jobs/{job_id}/forge/retry"' in html and "Retry the forge write" in html
