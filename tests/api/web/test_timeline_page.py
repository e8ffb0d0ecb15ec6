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
        r'<li class="entry tone-(\w+)" data-kind="(\w+)">\s*<div class="entry-head">\s*'
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
