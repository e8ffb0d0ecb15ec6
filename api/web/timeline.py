"""A ticket page's timeline: the ticket's own entries and the router's decisions about it, merged into one list,
newest first (`history`); and how an entry (a row of `storage/timeline.py`) reads there: a label in words, a symbol
and a tone (never colour alone), and the facts of its `data` a person looks for — the receipt's status, the stage
change, the slot and its wipe, the tracker close's result, a dispatch job's claim and result with a link to its page
and to what was written to the forge — and who did it ("by alice"). Every kind the service
writes has a row here; an unknown kind still reads as words."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from api.web import decisions
from contracts.envelope import CHANGES_READY
from storage.models import TimelineEntry
from storage.paging import decode_cursor, encode_cursor

OK, BAD, WARN, INFO = "ok", "bad", "warn", "info"
SYMBOLS = {OK: "✓", BAD: "✗", WARN: "!", INFO: "•"}


@dataclass(frozen=True)
class EntryView:
    label: str
    tone: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    link: str | None = None
    # The account (or the bootstrap user, or a machine such as "ci") that made the entry, when one did.
    actor: str | None = None
    # The dispatch job the entry is about (its page: /jobs/{id}), and what the service wrote to the forge for it.
    job_id: int | None = None
    forge: list[tuple[str, str]] = field(default_factory=list)

    @property
    def symbol(self) -> str:
        return SYMBOLS[self.tone]


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _facts(*pairs: tuple[str, Any]) -> list[tuple[str, str]]:
    """The pairs whose value says something; empty ones are left out."""
    return [(name, text) for name, value in pairs if (text := _text(value)) is not None]


def _move(data: dict[str, Any]) -> str | None:
    before, after = data.get("from"), data.get("to")
    if after is None:
        return None
    return f"{before or 'new ticket'} → {after}"


def _created(data: dict[str, Any]) -> EntryView:
    return EntryView("Created", INFO, _facts(("stage", data.get("stage"))))


def _stage_change(label: str, tone: str) -> Callable[[dict[str, Any]], EntryView]:
    def view(data: dict[str, Any]) -> EntryView:
        return EntryView(
            label,
            tone,
            _facts(
                ("stage", _move(data)),
                ("waiting on", data.get("waiting_on")),
                ("reason", data.get("reason")),
            ),
        )

    return view


def _writing_report(data: dict[str, Any]) -> EntryView:
    status = data.get("status") or "?"
    if status.startswith("FAIL_"):
        tone = BAD
    elif status in ("BACKFILL_READY", "STOP_NEED_TOPICS"):
        tone = WARN  # a person has work to do
    elif status in ("SUCCESS", "SKIP_ALL_CAUGHT_UP"):
        tone = OK
    else:
        tone = INFO
    return EntryView(
        f"Writing report: {status}",
        tone,
        _facts(
            ("stage", _move(data)),
            ("waiting on", data.get("waiting_on")),
            ("missing", data.get("missing")),
            ("items", data.get("items") or None),
            ("chat post", data.get("chat")),
            ("agent run", f"#{data['run']}" if data.get("run") else None),
            ("link from", data.get("link_from")),
        ),
        link=data.get("link"),
    )


def _automation(data: dict[str, Any]) -> EntryView:
    word = "on" if data.get("enabled") else "off"
    return EntryView(f"Writing automation turned {word}", INFO)


def _slot_claimed(data: dict[str, Any]) -> EntryView:
    return EntryView("Slot claimed", INFO, _facts(("slot", data.get("slot"))))


def _wipe_facts(wipe: dict[str, Any] | None) -> list[tuple[str, str]]:
    if not wipe:
        return []
    if not wipe.get("ran"):
        how = "recorded only (no wipe command)" if wipe.get("ok") else wipe.get("detail")
        return _facts(("wipe", how))
    return _facts(
        ("wipe", wipe.get("detail")),
        ("exit code", wipe.get("exit_code")),
        ("output", wipe.get("output")),
    )


def _slot_released(data: dict[str, Any]) -> EntryView:
    return EntryView(
        "Slot released",
        OK,
        _facts(("slot", data.get("slot")), ("after", data.get("trigger")), ("why", data.get("reason")))
        + _wipe_facts(data.get("wipe")),
    )


def _slot_wipe_failed(data: dict[str, Any]) -> EntryView:
    return EntryView(
        "Bay wipe failed; slot kept",
        BAD,
        _facts(("slot", data.get("slot")), ("after", data.get("trigger"))) + _wipe_facts(data.get("wipe")),
    )


def _slot_release_failed(data: dict[str, Any]) -> EntryView:
    return EntryView("Slot release could not run", BAD, _facts(("detail", data.get("detail"))))


def _tracker_closed(data: dict[str, Any]) -> EntryView:
    return EntryView(
        "Tracker issue closed",
        OK,
        _facts(
            ("issue", data.get("issue") or data.get("issue_id")),
            ("state", data.get("state")),
            ("already closed", data.get("already") if data.get("already") else None),
            ("attempts", data.get("attempts")),
        ),
    )


def _tracker_close_failed(data: dict[str, Any]) -> EntryView:
    return EntryView(
        "Tracker close failed; the ticket stays done",
        BAD,
        _facts(("issue", data.get("issue_id")), ("attempts", data.get("attempts")), ("why", data.get("detail"))),
    )


def _job_claimed(data: dict[str, Any]) -> EntryView:
    return EntryView(
        "Job claimed by a worker",
        INFO,
        _facts(
            ("job", data.get("role")),
            ("worker", data.get("worker")),
            ("bay", data.get("bay")),
            ("attempt", data.get("attempt")),
            ("stage", _move(data) if data.get("from") != data.get("to") else None),
            ("waiting on", data.get("waiting_on")),
        ),
    )


def _job_succeeded(data: dict[str, Any]) -> EntryView:
    changes = data.get("status") == CHANGES_READY
    return EntryView(
        "Job done: changes ready" if changes else "Job done: nothing to change",
        OK,
        _facts(("branch", data.get("branch")), ("pull request", "queued for the forge" if changes else None)),
    )


def _job_failed(data: dict[str, Any]) -> EntryView:
    return EntryView(
        "Job failed",
        BAD,
        _facts(("why", data.get("reason")), ("failure", data.get("failure")), ("waiting on", data.get("waiting_on"))),
    )


def _job_retried(data: dict[str, Any]) -> EntryView:
    return EntryView("Job run again", INFO, _facts(("as job", data.get("job_id")), ("run again", data.get("retry_of"))))


def _forge_failed(data: dict[str, Any]) -> EntryView:
    return EntryView(
        "The forge refused the write",
        BAD,
        _facts(("forge said", data.get("error")), ("stage", _move(data)), ("waiting on", data.get("waiting_on"))),
    )


def _forge_retried(data: dict[str, Any]) -> EntryView:
    return EntryView("Forge write queued again", INFO, _facts(("waiting on", data.get("waiting_on"))))


def _pull_request_moved(data: dict[str, Any]) -> EntryView:
    """A move its pull request made (`domain/dispatch/pull_requests.py`): pushed, piped, merged, closed."""
    return EntryView(
        "Its pull request moved it",
        OK if data.get("to") in ("human_test", "ship", "done") else WARN if data.get("to") == "blocked" else INFO,
        _facts(("because of", data.get("on")), ("stage", _move(data)), ("waiting on", data.get("waiting_on"))),
    )


def _job_requeued(data: dict[str, Any]) -> EntryView:
    return EntryView(
        "Job back in the queue",
        WARN,
        _facts(("leases run out", data.get("attempts")), ("worker", data.get("worker")), ("bay", data.get("bay"))),
    )


def _job_cancelled(data: dict[str, Any]) -> EntryView:
    return EntryView("Job cancelled", WARN, _facts(("why", data.get("reason"))))


def _pull_request(data: dict[str, Any]) -> EntryView:
    how = "opened" if data.get("created", True) else "found open"
    return EntryView(
        f"Draft pull request {how}",
        OK,
        _facts(("forge", data.get("forge")), ("stage", _move(data)), ("waiting on", data.get("waiting_on"))),
    )


KINDS: dict[str, Callable[[dict[str, Any]], EntryView]] = {
    "created": _created,
    "stage_changed": _stage_change("Stage change", INFO),
    "marked_done": _stage_change("Marked done", OK),
    "cancelled": _stage_change("Cancelled", WARN),
    "writing_report": _writing_report,
    "automation_changed": _automation,
    "slot_claimed": _slot_claimed,
    "slot_released": _slot_released,
    "slot_wipe_failed": _slot_wipe_failed,
    "slot_release_failed": _slot_release_failed,
    "tracker_closed": _tracker_closed,
    "tracker_close_failed": _tracker_close_failed,
    "job_claimed": _job_claimed,
    "job_succeeded": _job_succeeded,
    "job_failed": _job_failed,
    "job_requeued": _job_requeued,
    "job_cancelled": _job_cancelled,
    "job_retried": _job_retried,
    # The jobs process's forge write for a job (`domain/dispatch/forge.py`): its pull request, now the ticket's link.
    "pull_request": _pull_request,
    "forge_failed": _forge_failed,
    "forge_retried": _forge_retried,
    # The moves the ticket's pull request and its pipelines make.
    "pull_request_moved": _pull_request_moved,
}
# Links to the forge an entry's data may carry (a job's pull request and comment), in the order shown.
FORGE_LINKS = (("pull_request", "pull request"), ("comment", "comment"))


def describe(entry: TimelineEntry) -> EntryView:
    """The entry as a person reads it."""
    data = entry.data if isinstance(entry.data, dict) else {}
    view = KINDS.get(entry.kind)
    described = view(data) if view is not None else EntryView(entry.kind.replace("_", " ").capitalize(), INFO)
    actor = data.get("actor")
    job_id = data.get("job_id")
    forge = [
        (words, url)
        for name, words in FORGE_LINKS
        if isinstance(url := data.get(name), str) and url.startswith(("https://", "http://"))
    ]
    return replace(
        described,
        actor=actor if isinstance(actor, str) and actor else None,
        job_id=job_id if isinstance(job_id, int) and not isinstance(job_id, bool) else None,
        forge=forge,
    )


# -- the timeline a ticket page shows: its entries and the router's decisions about it, merged ---------------------

# Where a page's cursor leaves each of the two lists: "" from the newest, END when it has nothing older.
END = "~"


@dataclass(frozen=True)
class Happened:
    """One item of a ticket page's timeline: a timeline entry, or a router decision about the ticket."""

    at: datetime
    entry: TimelineEntry | None = None
    decision: decisions.DecisionView | None = None


def history(board, router, key: str, *, limit: int, cursor: str | None) -> tuple[list[Happened], str | None]:
    """The ticket's timeline entries (`Board.timeline`) and the router's decisions about it
    (`Router.decisions`) as one list, newest first, `limit` at most, and the cursor of the older ones.

    Each list is read through its own keyset cursor and merged by time, so every item is shown once, on exactly one
    page; the page's cursor holds where it left each of them. A read-only view: the API's timeline resource stays
    the ticket's own entries."""
    own, judged = ("", "") if not cursor else decode_cursor(cursor, str, str)

    def entries(at_most: int, after: str) -> tuple[list, str | None]:
        return board.timeline(key, limit=at_most, cursor=after or None)

    def about(at_most: int, after: str) -> tuple[list, str | None]:
        # Not the service's own: what they are about (a claim, a result, a move its pull request made) is an entry.
        return router.decisions(
            limit=at_most, cursor=after or None, outcome=None, source=None, subject_id=key, since=None
        )

    sources = ((own, entries), (judged, about))
    read = [([], None) if after == END else page(limit, after) for after, page in sources]
    items = [
        [Happened(row.at, entry=row) for row in read[0][0]],
        [Happened(row.evaluated_at, decision=decisions.describe(row, {key})) for row in read[1][0]],
    ]
    # Both lists run newest first; the merge takes a run from the head of each.
    shown = list(itertools.islice(heapq.merge(*items, key=lambda item: item.at, reverse=True), limit))
    taken = (sum(item.entry is not None for item in shown), sum(item.decision is not None for item in shown))
    left = []
    for (after, page), (rows, older), count in zip(sources, read, taken, strict=True):
        if after == END or (not rows and older is None):
            left.append(END)
        elif count == 0:
            left.append(after)
        elif count == len(rows):
            left.append(older or END)
        else:
            # Part of what was read is on this page: the cursor after its last one, as the list itself makes it.
            left.append(page(count, after)[1])
    return shown, (None if left == [END, END] else encode_cursor(left))
