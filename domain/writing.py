"""The writing agent's units of work (`api/resources/writing.py` serves them): notify reports, the automation
toggle, and the content repository's config.

A notify report is one transaction: `WRITING-DAILY` (and its `writing` initiative) is created on first use,
moved per `machines.writing_ticket` through the board's `apply_stage_change` (compare-and-swap, exactly one timeline
entry — the receipt), one run of agent `writing-daily` is recorded, and the chat post is queued in the outbox.
If anything fails, none of it happened.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from domain import automation, chat, entity_tags, idempotency, units
from domain.automation import AutomationState
from domain.board import Board, StageChange, apply_stage_change
from domain.clock import Clock
from domain.config import Config
from machines import automation as automation_machine
from machines import writing_ticket as writing_machine
from machines.stages import WRITING_TICKET_KEY
from storage import initiatives, runs, settings, tickets, timeline
from storage.models import AgentRun, Ticket, TimelineEntry

AGENT_ID = "writing-daily"
INITIATIVE_ID = "writing"
INITIATIVE_NAME = "Writing"
TICKET_TITLE = "Daily writing: one article per calendar day"
RECEIPT_KIND = "writing_report"
AUDIT_KIND = "automation_changed"
IDEMPOTENCY_SCOPE = "writing.notify"
# What the content repository's CI is told (GET agents/writing/config); the agents strip monitors the same cron.
POLL_SCHEDULE = "0 9,18 * * *"
ARTICLES_PER_DAY = 1
CHAT_DAYS_SHOWN = 10


@dataclass(frozen=True)
class Report:
    """What one notify report did."""

    ticket: Ticket
    receipt: TimelineEntry
    run: AgentRun
    chat_queued: bool


@dataclass
class _Toggle:
    state: str


class WritingAgent:
    def __init__(self, config: Config, clock: Clock, board: Board):
        self.config = config
        self.clock = clock
        self.board = board

    # -- notify ---------------------------------------------------------------------------------------------

    def notify(
        self,
        body: dict[str, Any],
        *,
        actor: str,
        idempotency_key: str | None,
        answer: Callable[[Report], dict[str, Any]],
    ) -> tuple[dict[str, Any], bool]:
        """Record one report; return (`answer(report)`, replayed).

        With an `Idempotency-Key`, `answer` turns the report into the response body inside the transaction, so
        that a repeated key gets exactly the first answer back. Without one, nothing stores the answer, so it is
        built after the commit: on SQLite the unit of work runs on the one writer thread every write waits for,
        and the answer's shaping need not hold it up.
        """
        if idempotency_key is None:
            report = units.run(lambda: self._report(body, actor=actor), what="recording the writing report")
            return answer(report), False

        def work() -> tuple[dict[str, Any], bool]:
            return idempotency.once(
                IDEMPOTENCY_SCOPE,
                idempotency_key,
                body,
                lambda: answer(self._report(body, actor=actor)),
                now=self.clock(),
            )

        return units.run(work, what="recording the writing report")

    def _report(self, body: dict[str, Any], *, actor: str) -> Report:
        status = body["status"]
        missing = body.get("missing")
        items = body.get("items") or []
        move = writing_machine.notify_move(status)
        now = self.clock()
        row, created = self._writing_ticket(now)
        before_stage, before_waiting = row.stage, row.waiting_on

        extra_changes: dict[str, Any] = {}
        link_note = None
        if status == "SUCCESS":
            extra_changes["link"], link_note = self.article_link(items)

        chat_queued = move.chat
        if chat_queued:
            chat.queue(chat_message(status, missing, items, extra_changes.get("link")), source=status, at=now)
        run = runs.record(
            AGENT_ID,
            status=status,
            ok=not writing_machine.FAILURE_STATUS.match(status),
            started_at=now,
            finished_at=now,
            summary=run_summary(status, missing, len(items)),
            details={
                "trigger": "notify",
                "actor": actor,
                "missing": missing,
                "items": items,
                "chat": "queued" if chat_queued else "none",
            },
        )
        data = {
            "status": status,
            "missing": missing,
            "items": len(items),
            "run": run.id,
            "chat": "queued" if chat_queued else "none",
            **({"created": True, "from": None} if created else {}),
            **({"link": extra_changes["link"], "link_from": link_note} if status == "SUCCESS" else {}),
        }

        if move.event is None:  # AUTOMATION_DISABLED: the receipt and the run, nothing moves
            data.update({"from": None if created else row.stage, "to": row.stage, "actor": actor})
            receipt = timeline.append(
                row.key,
                kind=RECEIPT_KIND,
                summary=f"{status} from {actor}: the scheduled writing job did nothing (automation off); nothing moved",
                at=now,
                data=data,
            )
            if created:
                self.board.announce(StageChange(row, None, row.stage, None, None, actor, now, "create"))
        else:

            def step(ticket: Ticket) -> str:
                writing_machine.apply_report(ticket, status)
                return move.event

            change = apply_stage_change(
                row,
                step,
                clock=self.clock,
                kind=RECEIPT_KIND,
                actor=actor,
                config=self.config,
                summary=receipt_summary(status, actor, None if created else before_stage, move, missing),
                data=data,
                extra_changes=extra_changes,
            )
            receipt = change.entry
            if created:
                change = dataclasses.replace(change, from_stage=None, from_waiting_on=None)
            if created or (change.to_stage, change.to_waiting_on) != (before_stage, before_waiting):
                self.board.announce(change)

        return Report(self._shown(row), receipt, run, chat_queued)

    def article_link(self, items: list[dict[str, Any]]) -> tuple[str | None, str]:
        """The ticket's link after SUCCESS, and where it came from.

        `{SVC_SITE_URL}/writing/{slug}` of the last item with a slug. Without `SVC_SITE_URL` the same item's
        own `url` is used when it is an absolute http(s) URL; otherwise the link is cleared, so the ticket never
        points at an older article.
        """
        last = next((item for item in reversed(items) if item.get("slug")), None)
        if last is None:
            return None, "no item with a slug"
        if self.config.site_url:
            return f"{self.config.site_url.rstrip('/')}/writing/{quote(last['slug'], safe='')}", "SVC_SITE_URL"
        url = last.get("url") or ""
        if url.startswith(("https://", "http://")):
            return url, "item url (SVC_SITE_URL is unset)"
        return None, "SVC_SITE_URL is unset and the item has no absolute url"

    def _writing_ticket(self, now: datetime) -> tuple[Ticket, bool]:
        """`WRITING-DAILY`, locked for this transaction; created (with its initiative) on first use."""
        row = tickets.get(WRITING_TICKET_KEY, for_update=True)
        if row is not None:
            return row, False
        initiatives.insert_if_missing(
            id=INITIATIVE_ID, name=INITIATIVE_NAME, stage="active", created_at=now, updated_at=now
        )
        # A plain insert: two first reports at once collide here, and `units.run` retries the loser, which
        # then finds the winner's ticket.
        tickets.insert(
            key=WRITING_TICKET_KEY,
            initiative=INITIATIVE_ID,
            title=TICKET_TITLE,
            stage="agreement",
            waiting_on=None,
            tracker_issue_id=None,
            assigned_slot=None,
            link=None,
            needs_you=False,
            version=1,
            stage_changed_at=now,
            created_at=now,
            updated_at=now,
        )
        return tickets.get(WRITING_TICKET_KEY, for_update=True), True

    def _shown(self, row: Ticket) -> Ticket:
        return automation.shown([row])[0]

    # -- the automation toggle ------------------------------------------------------------------------------

    def automation(self) -> AutomationState:
        return automation.state()

    def set_automation(self, enabled: bool, *, actor: str, if_match: Sequence[str] | None = None) -> AutomationState:
        """Turn writing automation on or off; a change is audited on the `WRITING-DAILY` timeline.

        Setting the value it already has changes nothing and writes nothing.
        """

        def work() -> AutomationState:
            # The writing ticket's row lock (PostgreSQL) comes first, so two toggles at once take turns and only
            # the one that changes the setting writes an audit entry. (Before the ticket exists, two first toggles
            # collide on creating it, and the retried one finds the setting already changed.)
            tickets.get(WRITING_TICKET_KEY, for_update=True)
            current = self.automation()
            entity_tags.check_automation(if_match, current)
            toggle = _Toggle("enabled" if current.enabled else "disabled")
            was, now_enabled = automation_machine.switch(toggle, enabled)
            if was == now_enabled:
                return current
            now = self.clock()
            settings.put(automation.SETTING_KEY, {"enabled": now_enabled}, at=now, by=actor)
            row, created = self._writing_ticket(now)
            word = "on" if now_enabled else "off"
            effect = (
                "the scheduled catch-up runs again"
                if now_enabled
                else "the scheduled catch-up reports AUTOMATION_DISABLED and does nothing; hidden from Needs-you"
            )
            timeline.append(
                row.key,
                kind=AUDIT_KIND,
                summary=f"writing automation turned {word} by {actor}: {effect}",
                at=now,
                data={"enabled": now_enabled, "was": was, "actor": actor},
            )
            if created:
                self.board.announce(StageChange(row, None, row.stage, None, None, actor, now, "create"))
            return AutomationState(now_enabled, now, actor)

        return units.run(work, what="changing writing automation")

    # -- what the content repository reads --------------------------------------------------------------------

    def content_repo_config(self) -> dict[str, Any]:
        return {
            "automation_enabled": automation.is_enabled(),
            "articles_per_day": ARTICLES_PER_DAY,
            "notify_url": self.config.writing_notify_url,
            "poll_schedule": POLL_SCHEDULE,
            "site_url": self.config.site_url,
        }


# -- words ------------------------------------------------------------------------------------------------------


def _articles(count: int) -> str:
    return f"{count} article{'' if count == 1 else 's'}"


def receipt_summary(
    status: str, actor: str, before: str | None, move: writing_machine.NotifyMove, missing: int | None
) -> str:
    start = "new ticket" if before is None else before
    text = f"{status} from {actor}: {start} → {move.stage}"
    if move.waiting_on:
        text += f", waiting on {move.waiting_on}"
    if missing is not None:
        text += f"; {missing} missing"
    return text


def run_summary(status: str, missing: int | None, item_count: int) -> str:
    parts = [status]
    if missing is not None:
        parts.append(f"{missing} missing")
    if item_count:
        parts.append(f"{item_count} item{'' if item_count == 1 else 's'}")
    return "; ".join(parts)


def chat_message(status: str, missing: int | None, items: list[dict[str, Any]], link: str | None) -> str:
    """The chat post for a report (cut to the chat limit by `domain.chat.queue`)."""
    count = missing
    if status == "BACKFILL_READY":
        head = f"✍️ Writing: {_articles(count) + ' missing' if count is not None else 'articles are missing'}"
        text = (
            f"{head}, drafts can be written. Run the backfill writing workflow in the editor agent, "
            "then finalize-batch."
        )
    elif status == "STOP_NEED_TOPICS":
        head = f"{_articles(count)} missing" if count is not None else "articles are missing"
        text = f"🛑 Writing stopped: {head} and no topics are left. Refill the writing topics."
    elif status == "SUCCESS":
        last = next((item for item in reversed(items) if item.get("slug")), None)
        title = (last or {}).get("title") or (last or {}).get("slug")
        text = "✅ Writing: batch finalized and published"
        text += f": {title}" if title else "."
        if link:
            text += f" {link}"
    else:
        text = f"❌ Writing failed ({status}): fix the draft, QA or push, then run finalize-batch again."
        if count:
            text += f" {_articles(count)} missing."
    days = [item["date"] for item in items if item.get("date")]
    if days and status != "SUCCESS":
        shown = ", ".join(days[:CHAT_DAYS_SHOWN])
        more = f" and {len(days) - CHAT_DAYS_SHOWN} more" if len(days) > CHAT_DAYS_SHOWN else ""
        text += f" Days: {shown}{more}."
    return text
