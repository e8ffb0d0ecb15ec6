"""How a timeline entry (a row of `storage/timeline.py`) reads on a ticket page: a label in words, a symbol and a tone
(never colour alone), and the facts of its `data` a person looks for — the receipt's status, the stage change, the
slot and its wipe, the tracker close's result — and who did it ("by alice"). Every kind the service writes has a row
here; an unknown kind still reads as words."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from storage.models import TimelineEntry

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
}


def describe(entry: TimelineEntry) -> EntryView:
    """The entry as a person reads it."""
    data = entry.data if isinstance(entry.data, dict) else {}
    view = KINDS.get(entry.kind)
    described = view(data) if view is not None else EntryView(entry.kind.replace("_", " ").capitalize(), INFO)
    actor = data.get("actor")
    return replace(described, actor=actor) if isinstance(actor, str) and actor else described
