"""The reconciler against local servers shaped like GitHub's deliveries API, GitLab's hook events API and Linear's
GraphQL API, which deliver again to the app as the real senders would: what is asked for again, what is recorded,
what is left alone, and what a sender that cannot be read does to the run."""

from __future__ import annotations

import json
import uuid

import pytest

from domain.ops.reconciler import Reconciler
from domain.ops.runs import Trigger
from domain.router.reconciliation import TrackerCatchUp
from domain.services import build_services
from integrations.github import GitHub
from integrations.gitlab import GitLab
from integrations.linear import LinearTracker
from storage import db as storage_db

from events_kit import (
    ALLOWLIST,
    GITHUB_SECRET,
    GITLAB_TOKEN,
    TRACKER_SECRET,
    example,
    github_headers,
    gitlab_headers,
    seed_board,
)
from servers.forges import GITHUB_TOKEN, FakeGitHub, FakeGitLab
from servers.forges import GITLAB_TOKEN as GITLAB_API_TOKEN
from servers.linear import API_KEY, FakeLinear
from testclient import ApiClient

# The ledger, the checkpoints and the races between a redelivery and the ledger's entry depend on the database.
pytestmark = pytest.mark.both_backends

CI_SECRET = "test-ci-secret-0123456789abcdef"
HOOK = "repos/acme/portfolio/hooks/467123908"
OTHER_HOOK = "repos/acme/billing/hooks/12"
LAB_HOOK = "projects/15/hooks/7"


class Service:
    """The app behind the forge endpoint, reachable by the fakes; `down` makes it answer 503 as during an outage."""

    def __init__(self, api: ApiClient):
        self.api = api
        self.down = False

    def __call__(self, headers: dict[str, str], body: bytes) -> int:
        if self.down:
            return 503
        return self.api.post("/api/v1/webhooks/forge", body=body, headers=headers, auth=None).status_code


@pytest.fixture
def world(app_factory, config_factory, clock):
    config = config_factory(
        router_allowlist=ALLOWLIST,
        github_webhook_secret=GITHUB_SECRET,
        gitlab_webhook_token=GITLAB_TOKEN,
        tracker_webhook_secret=TRACKER_SECRET,
    )
    api = ApiClient(app_factory(config), basic="admin:correct-horse-battery", ci_secret=CI_SECRET)
    seed_board(api, tickets={"PORT-12": "queued"})
    service = Service(api)
    with FakeGitHub(service, clock=clock) as github, FakeGitLab(service, clock=clock) as gitlab:
        yield World(config, clock, api, service, github, gitlab)


class World:
    def __init__(self, config, clock, api, service, github, gitlab):
        self.config, self.clock, self.api, self.service = config, clock, api, service
        self.github, self.gitlab = github, gitlab

    def reconciler(
        self, *, github_hooks=(HOOK,), gitlab_hooks=(), tracker=None, github=None, gitlab=None, max_pages=None, **knobs
    ):
        import dataclasses

        config = dataclasses.replace(self.config, github_hooks=github_hooks, gitlab_hooks=gitlab_hooks, **knobs)
        return Reconciler(
            config,
            self.clock,
            github=github or GitHub(self.github.url, GITHUB_TOKEN, tries=1),
            gitlab=gitlab or GitLab(self.gitlab.url, GITLAB_API_TOKEN, tries=1),
            tracker=tracker,
            catch_up=TrackerCatchUp(build_services(config, self.clock).router.receive, self.clock),
            max_pages=max_pages,
        )

    def run(self, **kwargs):
        with storage_db.connection():
            return self.reconciler(**kwargs)(Trigger("command"))

    def push(self, number: int, hook: str = HOOK) -> str:
        """GitHub sends a pull_request event (its own body, its own guid) to the service; its guid."""
        payload = example("payloads/github/pull_request.opened.json")
        payload["pull_request"]["number"] = number
        body = json.dumps(payload).encode()
        guid = str(uuid.uuid4())
        self.github.hook(hook)
        self.github.send(hook, "pull_request", "opened", github_headers("pull_request", guid, body), body)
        return guid

    def merge_request(self, iid: int, hook: str = LAB_HOOK, token: str = GITLAB_TOKEN) -> str:
        payload = example("payloads/gitlab/merge_request.open.json")
        payload["object_attributes"]["iid"] = iid
        body = json.dumps(payload).encode()
        key = str(uuid.uuid4())
        headers = gitlab_headers("Merge Request Hook", str(uuid.uuid4()), token=token, idempotency_key=key)
        self.gitlab.hook(hook)
        self.gitlab.send(hook, "merge_request_hooks", headers, body)
        return key

    def decisions(self) -> list[dict]:
        return self.api.get("/api/v1/router/decisions?limit=500").json["decisions"]

    def ledger(self) -> list[dict]:
        return self.api.get("/api/v1/router/reconciliation?limit=500").json["gaps"]

    def runs(self) -> list[dict]:
        return self.api.get("/api/v1/agents/runs?agent_id=reconciler").json["runs"]


def test_github_deliveries_refused_during_an_outage_are_redelivered_and_recorded_once(world):
    world.push(1)
    world.service.down = True
    lost = [world.push(2), world.push(3)]
    world.service.down = False
    assert len(world.decisions()) == 1

    report = world.run()

    assert report.ok and report.asked == 2
    assert len(world.decisions()) == 3
    gaps = {g["guid"]: g for g in world.ledger()}
    assert set(gaps) == set(lost)
    assert {g["state"] for g in gaps.values()} == {"recovered"} and {g["attempts"] for g in gaps.values()} == {1}
    run = world.runs()[0]
    assert run["ok"] is True and "asked again for 2" in run["summary"]

    asked = len(world.github.asked_again())
    again = world.run()
    assert again.asked == 0 and len(world.github.asked_again()) == asked
    assert len(world.decisions()) == 3 and len(world.ledger()) == 2


def test_a_guid_never_accepted_is_asked_for_three_times_then_given_up(world):
    world.service.down = True
    guid = world.push(7)
    for _ in range(3):
        assert world.run().asked == 1
        world.clock.advance(minutes=10)
    (gap,) = world.ledger()
    assert (gap["state"], gap["attempts"]) == ("redelivered", 3)

    report = world.run()
    assert report.asked == 0 and report.given_up == 1
    (gap,) = world.ledger()
    assert (gap["guid"], gap["state"], gap["attempts"]) == (guid, "given_up", 3)
    assert len(world.github.asked_again()) == 3
    assert world.run().asked == 0 and len(world.github.asked_again()) == 3
    page = world.api.get("/decisions").text
    assert "Given up" in page and guid in page


def test_a_github_delivery_refused_for_a_wrong_secret_is_asked_for_again_and_recovered_once_put_right(world):
    # The contract's rule for GitHub: a guid none of whose deliveries got a 2xx is asked for again, whatever it
    # got; GitHub signs each attempt with the hook's secret, so once that is put right, the redelivery is accepted.
    payload = example("payloads/github/pull_request.opened.json")
    payload["pull_request"]["number"] = 21
    body = json.dumps(payload).encode()
    guid = str(uuid.uuid4())
    world.github.hook(HOOK)
    wrong = github_headers("pull_request", guid, body, secret="the-hooks-old-secret-0123456789")
    assert world.github.send(HOOK, "pull_request", "opened", wrong, body) == 401

    assert world.run().asked == 1
    (gap,) = world.ledger()
    assert (gap["guid"], gap["state"], gap["attempts"]) == (guid, "redelivered", 1)
    assert world.decisions() == []

    world.github.hook(HOOK).sent[guid].headers.update(github_headers("pull_request", guid, body))
    world.clock.advance(minutes=10)
    assert world.run().asked == 1
    (gap,) = world.ledger()
    assert (gap["state"], gap["attempts"]) == ("recovered", 2)
    assert len(world.decisions()) == 1


def test_no_more_than_the_runs_maximum_is_asked_for_and_the_rest_comes_next_run(world):
    world.service.down = True
    for number in range(10, 13):
        world.push(number)
    world.service.down = False

    first = world.run(reconcile_max=2)
    assert (first.asked, first.deferred) == (2, 1)
    second = world.run(reconcile_max=2)
    assert (second.asked, second.deferred) == (1, 0)
    assert len(world.decisions()) == 3


def test_the_checkpoint_is_kept_in_the_database_across_a_restart(world):
    world.push(20)
    first = world.run()
    assert first.hooks[f"github:{HOOK}"]["since"].startswith("2026-11-19T10:00:00")  # 24 hours back
    world.clock.advance(hours=2)
    # A new reconciler (a restarted process) starts where the last read ended, less the overlap.
    second = world.run()
    assert second.hooks[f"github:{HOOK}"]["since"].startswith("2026-11-20T09:50:00")


def test_a_redelivery_of_an_event_already_recorded_answers_200_with_it_and_marks_its_gap_recovered(world):
    from storage import reconciliation
    from storage.db import transaction

    payload = example("payloads/github/pull_request.opened.json")
    body = json.dumps(payload).encode()
    headers = github_headers("pull_request", "guid-recorded", body)
    first = world.api.post("/api/v1/webhooks/forge", body=body, headers=headers, auth=None)
    assert first.status_code == 202
    with storage_db.connection(), transaction():
        reconciliation.open_gap(
            sender="github",
            hook=HOOK,
            delivery="1",
            guid="guid-recorded",
            event="pull_request.opened",
            state="redelivered",
            attempts=1,
            detail="asked again",
            at=world.clock(),
        )
    again = world.api.post("/api/v1/webhooks/forge", body=body, headers=headers, auth=None)
    assert again.status_code == 200
    assert again.json["decision"]["id"] == first.json["decision"]["id"]
    assert len(world.decisions()) == 1
    (gap,) = world.ledger()
    assert gap["state"] == "recovered"


def test_gitlab_server_failures_are_resent_and_refusals_are_listed_never_resent(world):
    world.service.down = True
    lost = world.merge_request(31)
    world.service.down = False
    refused = world.merge_request(32, token="not-the-token-0123456789")

    report = world.run(github_hooks=(), gitlab_hooks=(LAB_HOOK,))

    assert report.ok and (report.asked, report.refused_by_us) == (1, 1)
    gaps = {g["guid"]: g for g in world.ledger()}
    assert gaps[lost]["state"] == "recovered" and gaps[lost]["sender"] == "gitlab"
    assert gaps[refused]["state"] == "refused_by_us" and gaps[refused]["attempts"] == 0
    assert len(world.gitlab.asked_again()) == 1
    world.clock.advance(minutes=10)
    assert world.run(github_hooks=(), gitlab_hooks=(LAB_HOOK,)).asked == 0
    assert len(world.gitlab.asked_again()) == 1


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("unknown hook", "GitHub answered 404"),
        ("no permission", "GitHub answered 403 (the credentials were refused)"),
        ("malformed record", "delivery record 0 of page 1"),
        ("bad cursor", "GitHub answered 400"),
    ],
)
def test_a_hook_that_cannot_be_read_fails_the_run_is_in_the_ledger_and_stops_nothing_else(world, fault, said):
    world.service.down = True
    world.push(40, hook=OTHER_HOOK)
    for number in range(41, 41 + (101 if fault == "bad cursor" else 1)):
        world.push(number)
    world.service.down = False
    broken = HOOK
    if fault == "unknown hook":
        broken = "repos/acme/nothing/hooks/9"
    elif fault == "no permission":
        world.github.forbidden.add(HOOK)
    elif fault == "malformed record":
        world.github.malformed[HOOK] = {"id": "not-a-number"}
    else:
        world.github.bad_cursor = True

    report = world.run(github_hooks=(broken, OTHER_HOOK))

    assert not report.ok
    assert any(broken in failure and said in failure for failure in report.failures), report.failures
    run = world.runs()[0]
    assert run["ok"] is False and broken in run["summary"] and said in run["summary"]
    # the other hook was read and its lost delivery recovered
    assert any(g["hook"] == OTHER_HOOK and g["state"] == "recovered" for g in world.ledger())
    unreadable = [g for g in world.ledger() if g["hook"] == broken and g["guid"] is None]
    assert len(unreadable) == 1 and said in unreadable[0]["detail"] and unreadable[0]["state"] == "given_up"
    assert GITHUB_TOKEN not in json.dumps(world.ledger()) and GITHUB_TOKEN not in run["summary"]


def test_a_slow_sender_is_cut_off_by_the_timeout_and_the_others_are_still_read(world):
    world.service.down = True
    world.merge_request(50)
    world.service.down = False
    world.github.hook(HOOK)
    world.github.hold.clear()  # GitHub answers nothing
    try:
        report = world.run(
            gitlab_hooks=(LAB_HOOK,), github=GitHub(world.github.url, GITHUB_TOKEN, timeout=(2.0, 0.3), tries=1)
        )
    finally:
        world.github.hold.set()
    assert not report.ok and report.asked == 1
    assert any("timed out" in failure and HOOK in failure for failure in report.failures)


def test_a_tracker_state_change_with_no_webhook_becomes_one_poller_decision(world):
    with FakeLinear() as linear:
        team = linear.add_team("PORT")
        issue = linear.add_issue("PORT-12", team, "Todo")
        world.api.post("/api/v1/tickets", json={"key": "PORT-30", "initiative_id": "portfolio", "title": "T"})
        world.api.post(
            "/api/v1/tickets",
            json={"key": "PORT-31", "initiative_id": "portfolio", "title": "U", "tracker_issue_id": issue.id},
        )
        linear.move(issue, "In Progress", at=world.clock())
        tracker = LinearTracker(linear.url, API_KEY)

        report = world.run(github_hooks=(), tracker=tracker)
        assert report.ok and report.caught_up == 1
        (decision,) = [d for d in world.decisions() if d["source"] == "poller"]
        assert decision["kind"] == "state_changed" and decision["subject_id"] == "PORT-31"
        envelope = decision["envelope"]
        assert envelope["transition"]["from"] == "agreement" and envelope["transition"]["to"] == "execute"
        assert envelope["actor"] == {"kind": "system", "id": "svc:reconciler", "roles": []}
        assert envelope["id"] == f"reconcile:linear:{issue.id}:{issue.updated_at}"
        (gap,) = world.ledger()
        assert (gap["sender"], gap["state"]) == ("linear", "recovered")

        world.clock.advance(minutes=10)
        assert world.run(github_hooks=(), tracker=tracker).caught_up == 0
        assert len([d for d in world.decisions() if d["source"] == "poller"]) == 1


def test_a_github_reading_cut_short_by_the_page_cap_says_truncated_and_keeps_its_checkpoint(world):
    world.service.down = True
    for number in range(100, 201):  # 101 deliveries: two pages of 100
        world.push(number)
    world.service.down = False

    first = world.run(max_pages=1, reconcile_max=5)
    assert first.truncated == [f"github {HOOK}"] and "truncated" in first.run.summary
    assert first.asked == 5  # what was read is still asked for again
    hook_rows = [g for g in world.ledger() if g["hook"] == HOOK and g["guid"] is None]
    assert len(hook_rows) == 1 and hook_rows[0]["detail"].startswith("truncated")
    assert "truncated" in world.runs()[0]["summary"]
    # The checkpoint did not move past the page that was never read: none was saved.
    assert f"github:{HOOK}" not in stored_checkpoints()
    world.run(max_pages=2, reconcile_max=200)
    assert f"github:{HOOK}" in stored_checkpoints()  # a reading that reached back moves it


def test_a_gitlab_reading_cut_short_by_the_page_cap_says_truncated_and_keeps_its_checkpoint(world):
    world.service.down = True
    for iid in range(50, 71):  # 21 events: two pages of 20, GitLab's most there
        world.merge_request(iid)
    world.service.down = False

    first = world.run(github_hooks=(), gitlab_hooks=(LAB_HOOK,), max_pages=1, reconcile_max=2)
    assert first.truncated == [f"gitlab {LAB_HOOK}"] and first.asked == 2
    assert "truncated" in world.runs()[0]["summary"]
    assert all("per_page=20" in c["path"] for c in world.gitlab.calls if c["path"].split("?")[0].endswith("/events"))
    assert f"gitlab:{LAB_HOOK}" not in stored_checkpoints()


def stored_checkpoints() -> dict:
    from storage import reconciliation

    with storage_db.connection(), storage_db.transaction():
        return reconciliation.checkpoints()
