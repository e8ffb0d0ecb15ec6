"""A ticket page's timeline reads as words: what happened, its outcome (with a symbol, not colour alone) and the
facts a person looks for, for the entries the board, the writing agent and the toggle write through the API.
(Slot releases and tracker closes come from the jobs process: see tests/svc/test_demo.py.)"""

import re

import pytest


@pytest.fixture
def board(api):
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port", "stage": "active"})
    api.post("/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "port", "title": "One", "stage": "queued"})
    return api


def entries(html: str) -> list[tuple[str, str, str]]:
    """(kind, tone, label) of each entry, newest first."""
    found = re.findall(
        r'<li class="entry tone-(\w+)" data-kind="(\w+)" id="entry-\d+">\s*<div class="entry-head">\s*'
        r'<span class="entry-label tone-\w+"><span aria-hidden="true">(.)</span> ([^<]+)</span>',
        html,
    )
    return [(kind, tone, f"{symbol} {label.strip()}") for tone, kind, symbol, label in found]


def test_stage_changes_slot_claims_and_mark_done_read_as_words(board):
    board.post("/api/v1/tickets/PORT-1/move", json={"to": "execute", "reason": "ready to start"})
    board.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-1"})
    board.post("/api/v1/tickets/PORT-1/mark_done", json={})
    html = board.get("/tickets/PORT-1").text
    assert entries(html) == [
        ("marked_done", "ok", "✓ Marked done"),
        ("slot_claimed", "info", "• Slot claimed"),
        ("stage_changed", "info", "• Stage change"),
        ("created", "info", "• Created"),
    ]
    assert "<dt>stage</dt><dd>queued → execute</dd>" in html
    assert "<dt>reason</dt><dd>ready to start</dd>" in html
    assert "<dt>slot</dt><dd>bay-1</dd>" in html


def test_writing_reports_and_the_toggle_read_as_words(board):
    def notify(body):
        assert board.post("/api/v1/agents/writing/notify", json=body, auth="ci").status_code == 200

    notify({"status": "BACKFILL_READY", "missing": 2})
    notify({"status": "FAIL_QA", "missing": 2})
    notify({"status": "SUCCESS", "missing": 0, "items": [{"slug": "hello", "url": "https://blog.example/hello"}]})
    board.post("/api/v1/agents/writing/automation", json={"enabled": False})
    html = board.get("/tickets/WRITING-DAILY").text
    assert entries(html) == [
        ("automation_changed", "info", "• Writing automation turned off"),
        ("writing_report", "ok", "✓ Writing report: SUCCESS"),
        ("writing_report", "bad", "✗ Writing report: FAIL_QA"),
        ("writing_report", "warn", "! Writing report: BACKFILL_READY"),
    ]
    assert "<dt>stage</dt><dd>new ticket → execute</dd>" in html
    assert "<dt>chat post</dt><dd>queued</dd>" in html
    assert '<a class="live" href="https://blog.example/hello"' in html


def test_a_kind_the_page_does_not_know_still_reads_as_words():
    from api.web.timeline import describe
    from storage.models import TimelineEntry

    view = describe(TimelineEntry(kind="bay_inspected", summary="looked", data=None))
    assert (view.label, view.tone, view.facts) == ("Bay inspected", "info", [])


def test_a_ticket_page_merges_its_entries_and_the_routers_decisions_by_time_page_by_page(board, clock):
    """The forge's, CI's and the tracker's events about a ticket belong in its timeline: the router's decisions
    about it stand among its entries, newest first, each linking to its own page, and paging shows each once."""
    from router_kit import envelope

    for n in range(30):
        clock.advance(minutes=1)
        moved = board.post("/api/v1/tickets/PORT-1/move", json={"to": "execute" if n % 2 == 0 else "queued"})
        assert moved.status_code == 200, moved.text
        clock.advance(minutes=1)
        # Events about the ticket that move nothing here (its pull request is not in ci: no push, no merge).
        kind = "pipeline_failed" if n % 3 else "pipeline_started"
        judged = board.post("/api/v1/events", json=envelope(kind, "PORT-1", initiative="port"), auth="ci")
        assert judged.status_code == 202, judged.text
    item = re.compile(r'<li class="(entry tone-\w+|decision line entry outcome-\w+)"[^>]* id="(entry|decision)-(\d+)"')
    shown, pages, url = [], 0, "/tickets/PORT-1"
    while url:
        html = board.get(url).text
        pages += 1
        found = item.findall(html)
        # Each item's time, from its <time datetime=...>, in page order (an entry's, or a decision line's).
        times = re.findall(r'<time datetime="([^"]+)"', html.split('<ol class="timeline">', 1)[1].split("</ol>")[0])
        assert len(times) == len(found)
        shown += [(what, int(ident), at) for (_, what, ident), at in zip(found, times, strict=True)]
        for _, what, ident in found:
            if what == "decision":
                assert f'href="/decisions/{ident}"' in html
        older = re.search(r'<a href="(/tickets/PORT-1\?cursor=[^"]+)" rel="next">', html)
        url = older.group(1).replace("&amp;", "&") if older else None
    entries = board.get("/api/v1/tickets/PORT-1/timeline?limit=500").json["entries"]
    decisions = board.get("/api/v1/router/decisions?subject_id=PORT-1&limit=500").json["decisions"]
    assert pages == 2  # 31 entries and 30 decisions, 50 a page
    assert sorted(ident for what, ident, _ in shown if what == "entry") == sorted(e["id"] for e in entries)
    assert sorted(ident for what, ident, _ in shown if what == "decision") == sorted(d["id"] for d in decisions)
    assert [at for _, _, at in shown] == sorted((at for _, _, at in shown), reverse=True)
    # Entry and decision alternate, as they happened: newest first, a decision a minute after each move.
    assert [what for what, _, _ in shown[:4]] == ["decision", "entry", "decision", "entry"]
    # The API's timeline stays the ticket's own entries.
    assert {e["kind"] for e in entries} <= {"created", "stage_changed"}
