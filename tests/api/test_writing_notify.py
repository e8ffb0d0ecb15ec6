"""POST /api/v1/agents/writing/notify through HTTP: every row of the seed's writing table, from every prior stage."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from machines.stages import STAGES
from storage import outbox
from storage.db import connection

from testclient import ApiClient

NOTIFY = "/api/v1/agents/writing/notify"
TICKET = "/api/v1/tickets/WRITING-DAILY"

# The seed's table: status -> (next stage, waiting_on, chat post)
TABLE = {
    "SKIP_ALL_CAUGHT_UP": ("done", None, False),
    "BACKFILL_READY": ("execute", "agent", True),
    "STOP_NEED_TOPICS": ("queued", "topic_refill", True),
    "SUCCESS": ("done", None, True),
    "FAIL_QA": ("execute", "agent_failed", True),
}


def notify(api, body, **kwargs):
    return api.post(NOTIFY, auth="ci", json=body, **kwargs)


def chat_posts():
    with connection():
        return [m.payload for m in reversed(outbox.recent(kind="chat", limit=500))]


def runs(api):
    return api.get("/api/v1/agents/runs?agent_id=writing-daily", auth="ci").json["runs"]


def timeline(api):
    return api.get(TICKET + "/timeline").json["entries"]


def put_writing_ticket_in(api, stage):
    """WRITING-DAILY created by hand, in `stage` (the board lets a ticket be created in any stage)."""
    api.post("/api/v1/initiatives", json={"id": "writing", "name": "Writing", "stage": "active"})
    created = api.post(
        "/api/v1/tickets", json={"key": "WRITING-DAILY", "initiative_id": "writing", "title": "W", "stage": stage}
    )
    assert created.status_code == 201, created.text


# Which move each status makes is the writing ticket's machine's, not the database's (the move itself, through the
# composed statements, is the first report's test below and the races', on both backends).
@pytest.mark.parametrize("prior", STAGES)
@pytest.mark.parametrize("status", list(TABLE))
def test_each_status_moves_the_ticket_from_any_prior_stage(api, status, prior):
    put_writing_ticket_in(api, prior)
    entries_before = len(timeline(api))
    body = {"status": status, "missing": 2, "items": [{"date": "2026-11-19", "slug": "a", "title": "A"}]}

    result = notify(api, body)

    assert result.status_code == 200, result.text
    stage, waiting_on, chat = TABLE[status]
    answer = result.json
    assert (answer["ticket"]["stage"], answer["ticket"]["waiting_on"]) == (stage, waiting_on)
    assert answer["chat"] == ("queued" if chat else "none")
    ticket = api.get(TICKET).json
    assert (ticket["stage"], ticket["waiting_on"]) == (stage, waiting_on)
    # exactly one timeline entry, the receipt, and it records the move
    entries = timeline(api)
    assert len(entries) == entries_before + 1
    receipt = entries[0]
    assert receipt == answer["receipt"]
    assert receipt["kind"] == "writing_report"
    assert receipt["data"]["from"] == prior and receipt["data"]["to"] == stage and receipt["data"]["status"] == status
    # one run of writing-daily
    (run,) = runs(api)
    assert run == answer["run"]
    assert run["status"] == status and run["ok"] is (not status.startswith("FAIL_"))
    assert run["details"]["missing"] == 2 and run["details"]["items"] == body["items"]
    # the chat post, queued or not
    posts = chat_posts()
    assert len(posts) == (1 if chat else 0)
    if chat:
        assert posts[0]["source"] == status and 0 < len(posts[0]["content"]) <= 2000


@pytest.mark.both_backends
def test_the_first_report_creates_the_writing_ticket_and_its_initiative(api):
    result = notify(api, {"status": "BACKFILL_READY", "missing": 3})

    assert result.status_code == 200
    ticket = result.json["ticket"]
    assert ticket["key"] == "WRITING-DAILY" and ticket["initiative_id"] == "writing"
    assert ticket["stage"] == "execute" and ticket["waiting_on"] == "agent" and ticket["needs_you"] is True
    initiatives = api.get("/api/v1/initiatives").json["initiatives"]
    assert [(i["id"], i["stage"]) for i in initiatives] == [("writing", "active")]
    # one entry only: the receipt says the ticket was created by this report
    (receipt,) = timeline(api)
    assert receipt["data"]["created"] is True and receipt["data"]["from"] is None
    assert receipt["summary"].startswith("BACKFILL_READY from ci: new ticket → execute")


def test_a_report_that_needs_a_human_puts_the_ticket_on_needs_you_and_success_takes_it_off(api):
    notify(api, {"status": "FAIL_PUSH"})
    assert [t["key"] for t in api.get("/api/v1/tickets?needs_you=true").json["tickets"]] == ["WRITING-DAILY"]
    notify(api, {"status": "SUCCESS", "items": [{"slug": "x"}]})
    assert api.get("/api/v1/tickets?needs_you=true").json["tickets"] == []


def test_automation_disabled_records_the_run_and_the_receipt_and_moves_nothing(api):
    notify(api, {"status": "STOP_NEED_TOPICS", "missing": 1})
    before = api.get(TICKET).json

    result = notify(api, {"status": "AUTOMATION_DISABLED"})

    assert result.status_code == 200
    assert result.json["chat"] == "none"
    after = api.get(TICKET).json
    assert (after["stage"], after["waiting_on"], after["updated_at"]) == (
        before["stage"],
        before["waiting_on"],
        before["updated_at"],
    )
    receipt = timeline(api)[0]
    assert receipt["data"]["status"] == "AUTOMATION_DISABLED" and receipt["data"]["to"] == "queued"
    assert [r["status"] for r in runs(api)] == ["AUTOMATION_DISABLED", "STOP_NEED_TOPICS"]
    assert len(chat_posts()) == 1  # only the STOP_NEED_TOPICS post


def test_automation_disabled_as_the_first_report_creates_the_ticket_without_moving_it(api):
    result = notify(api, {"status": "AUTOMATION_DISABLED"})
    assert result.json["ticket"]["stage"] == "agreement" and result.json["ticket"]["waiting_on"] is None
    assert len(timeline(api)) == 1


def test_every_failure_status_shares_the_failure_row(api):
    for status in ("FAIL_DRAFT", "FAIL_QA", "FAIL_PUSH", "FAIL_2_TIMES"):
        answer = notify(api, {"status": status}).json
        assert (answer["ticket"]["stage"], answer["ticket"]["waiting_on"]) == ("execute", "agent_failed")
    assert "FAIL_2_TIMES" in chat_posts()[-1]["content"]


def test_success_links_the_ticket_to_the_last_article_with_a_slug(app_factory, config_factory):
    api = _api(app_factory(config_factory(site_url="https://example.org")))
    items = [
        {"date": "2026-11-18", "slug": "first", "title": "First"},
        {"date": "2026-11-19", "slug": "second post", "title": "Second"},
        {"date": "2026-11-20", "title": "No slug yet"},
    ]
    answer = notify(api, {"status": "SUCCESS", "items": items}).json
    assert answer["ticket"]["link"] == "https://example.org/writing/second%20post"
    assert "https://example.org/writing/second%20post" in chat_posts()[0]["content"]


def test_without_a_site_url_success_uses_the_articles_own_url_or_no_link(api):
    with_url = [{"slug": "a", "url": "https://blog.example/writing/a"}]
    assert notify(api, {"status": "SUCCESS", "items": with_url}).json["ticket"]["link"] == with_url[0]["url"]
    answer = notify(api, {"status": "SUCCESS", "items": [{"slug": "b"}]}).json
    assert answer["ticket"]["link"] is None  # never left pointing at an older article
    assert answer["receipt"]["data"]["link_from"] == "SVC_SITE_URL is unset and the item has no absolute url"


def test_other_reports_keep_the_link_of_the_last_published_article(app_factory, config_factory):
    api = _api(app_factory(config_factory(site_url="https://example.org")))
    notify(api, {"status": "SUCCESS", "items": [{"slug": "a"}]})
    assert notify(api, {"status": "BACKFILL_READY"}).json["ticket"]["link"] == "https://example.org/writing/a"


def test_chat_posts_stay_within_the_limit_however_many_items(api):
    items = [
        {"date": f"2026-{m:02d}-{d:02d}", "slug": "s" * 200, "title": "t" * 500} for m in range(1, 13) for d in (1, 2)
    ]
    notify(api, {"status": "BACKFILL_READY", "missing": 400, "items": items * 16})
    (post,) = chat_posts()
    assert len(post["content"]) <= 2000 and "400 articles missing" in post["content"]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"status": "DONE"}, "/status"),
        ({"status": "FAIL_"}, "/status"),
        ({"status": "fail_qa"}, "/status"),
        ({"status": "FAIL_qa"}, "/status"),
        ({}, "/status"),
        ({"status": "SUCCESS", "missing": -1}, "/missing"),
        ({"status": "SUCCESS", "missing": 1.5}, "/missing"),
        ({"status": "SUCCESS", "items": {"slug": "x"}}, "/items"),
        ({"status": "SUCCESS", "items": [{"slug": "x"}] * 401}, "/items"),
        ({"status": "SUCCESS", "items": [{"date": "2026-02-30"}]}, "/items/0/date"),
        ({"status": "SUCCESS", "items": [{"date": "20261120"}]}, "/items/0/date"),
        ({"status": "SUCCESS", "items": [{"slug": "x", "author": "me"}]}, "/items/0/author"),
        ({"status": "SUCCESS", "surplus": True}, "/surplus"),
    ],
)
def test_a_bad_report_is_422_naming_the_field_and_changes_nothing(api, body, path):
    result = notify(api, body)
    assert result.status_code == 422
    assert path in [e["path"] for e in result.json["errors"]]
    assert api.get(TICKET).status_code == 404
    assert runs(api) == [] and chat_posts() == []


def test_items_are_optional_field_by_field_and_400_are_accepted(api):
    items = [{}] * 399 + [{"date": "2026-11-20", "slug": "x", "title": "X", "url": "/writing/x"}]
    assert notify(api, {"status": "BACKFILL_READY", "missing": 0, "items": items}).status_code == 200


@pytest.mark.parametrize(
    "auth_headers",
    [
        {},
        {"X-Svc-CI-Secret": "wrong-secret-0123456789abcdef"},
        {"Authorization": "Basic YWRtaW46Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5"},  # basic credentials do not open it
    ],
)
def test_notify_needs_the_ci_secret_and_records_nothing_without_it(api, auth_headers):
    result = api.post(NOTIFY, auth=None, headers=auth_headers, json={"status": "BACKFILL_READY"})
    assert result.status_code == 401
    assert result.headers["content-type"] == "application/problem+json"
    assert api.get(TICKET).status_code == 404 and chat_posts() == []


def test_stage_listeners_hear_each_move_once(app_factory):
    heard = []
    api = _api(app_factory(stage_listeners=(heard.append,)))
    notify(api, {"status": "BACKFILL_READY"})
    notify(api, {"status": "BACKFILL_READY"})  # nothing changed: nothing to announce
    notify(api, {"status": "FAIL_QA"})  # same stage, new waiting_on: announced
    notify(api, {"status": "AUTOMATION_DISABLED"})
    assert [(c.from_stage, c.to_stage, c.to_waiting_on, c.event) for c in heard] == [
        (None, "execute", "agent", "backfill_ready"),
        ("execute", "execute", "agent_failed", "failed"),
    ]
    assert {c.ticket.key for c in heard} == {"WRITING-DAILY"} and {c.actor for c in heard} == {"ci"}


@pytest.mark.both_backends
def test_a_report_whose_transaction_fails_leaves_no_receipt_no_run_and_no_chat_post(app_factory):
    def router_down(change):
        raise RuntimeError("listener failed")

    failing = _api(app_factory(stage_listeners=(router_down,)), check_document=False)
    result = failing.post(NOTIFY, auth="ci", json={"status": "BACKFILL_READY", "missing": 1})
    assert result.status_code == 500
    assert result.headers["content-type"] == "application/problem+json"

    healthy = _api(app_factory())
    assert healthy.get(TICKET).status_code == 404  # not even created
    assert runs(healthy) == [] and chat_posts() == []
    assert healthy.get("/api/v1/initiatives").json["initiatives"] == []


@pytest.mark.both_backends
def test_a_failing_move_of_an_existing_ticket_rolls_back_everything(app_factory):
    calls = []

    def fail_second(change):
        calls.append(change)
        if len(calls) == 2:
            raise RuntimeError("listener failed")

    api = _api(app_factory(stage_listeners=(fail_second,)), check_document=False)
    assert notify(api, {"status": "BACKFILL_READY"}).status_code == 200
    before_entries = timeline(api)
    assert notify(api, {"status": "SUCCESS", "items": [{"slug": "x"}]}).status_code == 500
    ticket = api.get(TICKET).json
    assert (ticket["stage"], ticket["link"]) == ("execute", None)
    assert timeline(api) == before_entries
    assert [r["status"] for r in runs(api)] == ["BACKFILL_READY"]
    assert [p["source"] for p in chat_posts()] == ["BACKFILL_READY"]


def test_the_agents_strip_shows_the_last_report(api):
    notify(api, {"status": "FAIL_DRAFT"})
    strip = {a["agent_id"]: a for a in api.get("/api/v1/agents").json["agents"]}
    assert strip["writing-daily"]["last_status"] == "FAIL_DRAFT" and strip["writing-daily"]["ok"] is False


def _api(app, check_document=True):
    from conftest import BASIC, CI_SECRET

    return ApiClient(app, basic=BASIC, ci_secret=CI_SECRET, check_document=check_document)


@pytest.mark.both_backends
def test_a_ticket_changed_behind_this_process_is_read_again_before_it_is_moved(api):
    # Every notify reads the writing ticket in its own transaction: a change made elsewhere (another process, here
    # a statement of its own) is what the next notify moves on from, whatever this process swapped before.
    assert notify(api, {"status": "BACKFILL_READY", "missing": 1}).status_code == 200
    with connection():
        from storage.db import db

        db.execute_sql(
            "UPDATE ticket SET stage = 'blocked', title = 'Changed elsewhere', version = version + 1 "
            "WHERE key = 'WRITING-DAILY'"
        )
    result = notify(api, {"status": "STOP_NEED_TOPICS", "missing": 1})

    assert result.status_code == 200, result.text
    assert result.json["receipt"]["data"]["from"] == "blocked"
    assert result.json["ticket"]["title"] == "Changed elsewhere"
    assert result.json["ticket"]["stage"] == "queued"
    assert api.get(TICKET).json == {**result.json["ticket"], "timeline": api.get(TICKET).json["timeline"]}
    # and the row kept is the one just written: the next report swaps it from there
    third = notify(api, {"status": "SKIP_ALL_CAUGHT_UP"})
    assert third.json["receipt"]["data"]["from"] == "queued" and third.json["ticket"]["stage"] == "done"
    assert [e["data"]["from"] for e in timeline(api)[:3]] == ["queued", "blocked", None]


@pytest.mark.both_backends
def test_notifies_sent_at_the_same_moment_are_each_recorded_and_none_is_refused(app):
    """A notify is never refused because another one ran at the same moment (the seed: the prior stage never
    restricts a notify): twelve clients report at once, again and again; every report is answered 200, with its own
    receipt and run, and the ticket has moved once per report."""
    clients = [_api(app, check_document=False) for _ in range(12)]
    assert notify(clients[0], {"status": "BACKFILL_READY", "missing": 1}).status_code == 200
    start = threading.Barrier(len(clients))

    def report(client) -> list[int]:
        start.wait()
        return [notify(client, {"status": "BACKFILL_READY", "missing": 2}).status_code for _ in range(8)]

    with ThreadPoolExecutor(len(clients)) as pool:
        answered = [code for codes in pool.map(report, clients) for code in codes]

    assert answered == [200] * 96
    first = clients[0]
    entries = first.get(TICKET + "/timeline?limit=200").json["entries"]
    assert len([e for e in entries if e["kind"] == "writing_report"]) == 97
    assert len(first.get("/api/v1/agents/runs?agent_id=writing-daily&limit=200", auth="ci").json["runs"]) == 97
    assert first.get(TICKET).headers["ETag"] == '"v98"'  # created at 1, moved once per report
