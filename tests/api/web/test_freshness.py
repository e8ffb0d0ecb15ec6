"""Conditional GETs of the web board: every page (and the Needs-you fragment) carries an ETag; asked again with
`If-None-Match`, it answers 304 with no body while nothing it shows has changed, at the cost of one statement,
and 200 with a new ETag as soon as something has — a move, a notify, a job's run, a claim, the wallet, a
decision, an initiative, the automation toggle, or a minute passing (the page says "3 minutes ago")."""

import html
import logging
import re

import pytest

from board import BoardClient
from conftest import PASSWORDS

PAGES = ["/", "/initiatives", "/decisions", "/tickets/PORT-1", "/fragments/needs-you"]


@pytest.fixture
def board(api):
    client = BoardClient(api)
    client.ticket("PORT-1", stage="human_test")
    client.ticket("PORT-2", stage="queued")
    return client


def tag_of(api, path):
    answer = api.get(path)
    assert answer.status_code == 200, answer.text
    assert answer.headers["etag"].startswith('W/"')
    return answer.headers["etag"]


def again(api, path, tag):
    return api.get(path, headers={"If-None-Match": tag})


@pytest.mark.parametrize("path", PAGES)
def test_an_unchanged_page_answers_304_with_no_body(board, path):
    tag = tag_of(board.api, path)
    answer = again(board.api, path, tag)
    assert answer.status_code == 304
    assert answer.content == b""
    assert answer.headers["etag"] == tag
    # Any of several tags, the tag without its weak prefix, and `*` all match (RFC 9110's weak comparison).
    assert again(board.api, path, f'"other", {tag}').status_code == 304
    assert again(board.api, path, tag.removeprefix("W/")).status_code == 304
    assert again(board.api, path, "*").status_code == 304
    assert again(board.api, path, '"something-else"').status_code == 200


def change_a_move(board):
    board.move("PORT-2", "execute")


def change_a_notify(board):
    answer = board.api.post("/api/v1/agents/writing/notify", json={"status": "BACKFILL_READY"}, auth="ci")
    assert answer.status_code == 200


def change_a_job_run(board):
    assert board.api.post("/api/v1/ops/pulse", json={"post_to_chat": "never"}).status_code == 200


def change_a_claim(board):
    board.claim("bay-1", "PORT-2")


def change_the_wallet(board):
    assert board.api.put("/api/v1/wallet", json={"budget": 10, "spent": 1, "locked": True}).status_code == 200


def change_an_initiative(board):
    assert board.api.patch("/api/v1/initiatives/port", json={"stage": "done"}).status_code == 200


def change_the_automation(board):
    assert board.api.post("/api/v1/agents/writing/automation", json={"enabled": False}).status_code == 200


def change_a_ticket_created(board):
    board.ticket("PORT-3", stage="agreement")


BOARD_CHANGES = [
    change_a_move,
    change_a_notify,
    change_a_job_run,
    change_a_claim,
    change_the_wallet,
    change_an_initiative,
    change_the_automation,
    change_a_ticket_created,
]


@pytest.mark.both_backends
@pytest.mark.parametrize("change", BOARD_CHANGES, ids=lambda f: f.__name__.removeprefix("change_"))
def test_the_board_answers_200_with_a_new_tag_after_any_change_it_shows(board, change, clock):
    tag = tag_of(board.api, "/")
    # Time moves between two changes (the few-row tables are marked by their `updated_at`); the minute does not.
    clock.advance(seconds=1)
    change(board)
    answer = again(board.api, "/", tag)
    assert answer.status_code == 200
    assert answer.headers["etag"] != tag
    assert again(board.api, "/", answer.headers["etag"]).status_code == 304


def test_a_slot_wipe_in_progress_changes_the_board(board, db_session, clock):
    from storage import slots

    board.claim("bay-1", "PORT-2")
    tag = tag_of(board.api, "/")
    slots.lease_wipe("bay-1", owner="steward", now=clock(), until=clock().replace(minute=5))
    answer = again(board.api, "/", tag)
    assert answer.status_code == 200
    assert "release in progress: the bay is being wiped" in answer.text


def test_a_minute_passing_changes_every_page(board, clock):
    tags = {path: tag_of(board.api, path) for path in PAGES}
    clock.advance(seconds=59)
    assert {path: again(board.api, path, tag).status_code for path, tag in tags.items()} == dict.fromkeys(PAGES, 304)
    clock.advance(seconds=1)
    assert {path: again(board.api, path, tag).status_code for path, tag in tags.items()} == dict.fromkeys(PAGES, 200)


def post_a_decision(board):
    envelope = {
        "schema": "svc.normalized-event/v0",
        "id": "poller:PORT-1:1",
        "occurred_at": "2026-11-20T10:00:00Z",
        "source": "poller",
        "transition": {"kind": "dispatch_requested", "from": None, "to": "queued"},
        "subject": {"type": "ticket", "id": "PORT-1"},
        "actor": {"kind": "system", "id": "svc:poller"},
        "dispatch_hints": {"eligible_for_worker": True, "suggested_role": "coder"},
    }
    assert board.api.post("/api/v1/events", json=envelope, auth="ci").status_code == 202


def test_each_page_moves_with_what_it_shows_and_not_with_the_rest(board):
    tags = {path: tag_of(board.api, path) for path in [*PAGES, "/tickets/PORT-2"]}
    # A router decision about PORT-1: the decisions page and PORT-1's page show it; the board does not.
    post_a_decision(board)
    moved = {path for path, tag in tags.items() if again(board.api, path, tag).status_code == 200}
    assert moved == {"/decisions", "/tickets/PORT-1"}

    tags = {path: tag_of(board.api, path) for path in tags}
    # A move of PORT-2: the board, the initiatives' counts and PORT-2's page; not PORT-1's, not the decisions.
    # (The move is queued for the router through the outbox; no decision is made until the jobs process runs.)
    board.move("PORT-2", "execute")
    moved = {path for path, tag in tags.items() if again(board.api, path, tag).status_code == 200}
    assert moved == {"/", "/initiatives", "/tickets/PORT-2", "/fragments/needs-you"}


@pytest.mark.parametrize("path", PAGES)
def test_a_304_reads_one_statement_and_renders_nothing(board, caplog, path):
    tag = tag_of(board.api, path)
    caplog.set_level(logging.DEBUG, logger="peewee")
    caplog.clear()
    assert again(board.api, path, tag).status_code == 304
    statements = [r for r in caplog.records if r.name == "peewee"]
    assert len(statements) == 1, [r.getMessage() for r in statements]


def test_a_full_board_reads_much_more(board, caplog):
    caplog.set_level(logging.DEBUG, logger="peewee")
    # A full page reads far more: the columns, the Needs-you list, every agent's runs, the bays...
    assert again(board.api, "/", '"stale"').status_code == 200
    assert len([r for r in caplog.records if r.name == "peewee"]) > 10


def test_the_page_carries_its_own_tag_for_the_script(board):
    for path in ["/", "/initiatives", "/decisions", "/tickets/PORT-1"]:
        answer = board.api.get(path)
        found = re.search(r'<main id="main" data-etag="([^"]+)"', answer.text)
        assert found and html.unescape(found.group(1)) == answer.headers["etag"], path


def test_an_unknown_ticket_page_carries_no_tag(board):
    answer = board.api.get("/tickets/NOPE-1")
    assert answer.status_code == 404
    assert "etag" not in answer.headers


def test_an_unknown_ticket_is_not_matched_by_a_star(board):
    # `If-None-Match: *` matches only a resource that has a current representation (RFC 9110, 13.1.2): a ticket
    # that does not exist answers its 404 page, never a 304 that would tell a client it has the page already.
    answer = again(board.api, "/tickets/NOPE-1", "*")
    assert answer.status_code == 404
    assert "No ticket NOPE-1 on the board" in answer.text
    assert again(board.api, "/tickets/PORT-1", "*").status_code == 304


def test_the_decisions_page_moves_when_a_decisions_subject_becomes_a_ticket(board):
    # A decision's subject links to its ticket page once that ticket is on the board: a new ticket changes the page.
    post_a_decision(board)  # about PORT-1, on the board
    envelope_about_port_9 = board.api.get("/api/v1/router/decisions").json["decisions"][0]["envelope"]
    envelope_about_port_9 |= {"id": "poller:PORT-9:1", "subject": {"type": "ticket", "id": "PORT-9"}}
    assert board.api.post("/api/v1/events", json=envelope_about_port_9, auth="ci").status_code == 202
    tag = tag_of(board.api, "/decisions")
    assert '<a href="/tickets/PORT-9">' not in board.api.get("/decisions").text
    board.ticket("PORT-9", stage="agreement")
    answer = again(board.api, "/decisions", tag)
    assert answer.status_code == 200
    assert '<a href="/tickets/PORT-9">' in answer.text
    # A move changes no link: the page stays as it was.
    tag = answer.headers["etag"]
    board.move("PORT-2", "execute")
    assert again(board.api, "/decisions", tag).status_code == 304


def test_people_never_share_a_tag(board, app):
    # A viewer's page has no controls and says "can look, not change"; another operator's says their own name: a
    # tag one of them holds must never answer another's request with a 304.
    from domain import accounts

    from conftest import CI_SECRET
    from testclient import ApiClient

    accounts.add("vera", "viewer", "vera-password-1", passwords=PASSWORDS)
    accounts.add("olga", "operator", "olga-password-1", passwords=PASSWORDS)
    viewer = ApiClient(app, basic="vera:vera-password-1", ci_secret=CI_SECRET)
    operator = ApiClient(app, basic="olga:olga-password-1", ci_secret=CI_SECRET)
    for path in PAGES:
        tags = {
            who: tag_of(client, path) for who, client in [("admin", board.api), ("vera", viewer), ("olga", operator)]
        }
        assert len(set(tags.values())) == 3, (path, tags)
        assert again(viewer, path, tags["admin"]).status_code == 200
        assert again(board.api, path, tags["vera"]).status_code == 200
        assert again(operator, path, tags["admin"]).status_code == 200
        assert again(viewer, path, tags["vera"]).status_code == 304


def needs_you_on_the_board(api) -> list[str]:
    section = api.get("/").text.split('id="needs-you"', 1)[1].split("</section>", 1)[0]
    return re.findall(r'data-key="([^"]+)"', section)


@pytest.mark.both_backends
def test_a_change_committed_after_a_newer_one_still_moves_the_tag(board, config, clock):
    # On PostgreSQL an id is taken when a row is inserted, not when its transaction commits: another process's
    # change (its timeline entry id N) may commit after a move whose entry is N+1 has. A page read between the two
    # commits must not keep answering 304 once the first one lands.
    from storage.db import is_postgres

    if not is_postgres():
        pytest.skip("SQLite lets one writer at a time, so its ids are committed in their order")
    import psycopg

    with psycopg.connect(config.database_url) as slower:  # say, the jobs process, half-way through a change
        slower.execute(
            "UPDATE ticket SET waiting_on = %s, needs_you = true, version = version + 1 WHERE key = %s",
            ("agent", "PORT-2"),
        )
        slower.execute(
            "INSERT INTO timeline_entry (ticket_key, at, kind, summary, data) VALUES (%s, %s, %s, %s, NULL)",
            ("PORT-2", clock().replace(tzinfo=None), "stage_changed", "queued → queued by the jobs process"),
        )
        board.move("PORT-1", "execute")  # a person's move, committed first, with the newer id
        tags = {path: tag_of(board.api, path) for path in ["/", "/fragments/needs-you", "/tickets/PORT-2"]}
        assert "PORT-2" not in needs_you_on_the_board(board.api)
        slower.commit()
    assert "PORT-2" in needs_you_on_the_board(board.api)
    assert {path: again(board.api, path, tag).status_code for path, tag in tags.items()} == dict.fromkeys(tags, 200)
