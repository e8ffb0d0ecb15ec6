"""The writing agent's units of work (`api/resources/writing.py` serves them): notify reports, the automation
toggle, and the content repository's config.

A notify report is one transaction: `WRITING-DAILY` (and its `writing` initiative) is created on first use,
moved per `machines.writing_ticket` through the board's `apply_stage_change` (compare-and-swap, exactly one timeline
entry — the receipt), one run of agent `writing-daily` is recorded, and the chat post is queued in the outbox.
If anything fails, none of it happened.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from domain import automation, chat, entity_tags, idempotency, units
from domain.automation import AutomationState
from domain.board import Board, StageChange, apply_stage_change
from domain.clock import Clock
from domain.config import Config
from domain.ops.schedules import AGENTS
from machines import automation as automation_machine
from machines import writing_ticket as writing_machine
from machines.stages import WRITING_TICKET_KEY
from storage import initiatives, runs, settings, tickets, timeline
from storage.idempotency import row_from, row_values
from storage.models import AgentRun, Ticket, TimelineEntry

AGENT_ID = "writing-daily"
INITIATIVE_ID = "writing"
INITIATIVE_NAME = "Writing"
TICKET_TITLE = "Daily writing: one article per calendar day"
RECEIPT_KIND = "writing_report"
AUDIT_KIND = "automation_changed"
IDEMPOTENCY_SCOPE = "writing.notify"
PUBLISHED = "SUCCESS"
ARTICLES_PER_DAY = 1
CHAT_DAYS_SHOWN = 10


@dataclass(frozen=True)
class Report:
    """What one notify report did: the ticket as it now stands, its receipt, the agent run, and whether a chat
    post was queued."""

    ticket: Ticket
    receipt: TimelineEntry
    run: AgentRun
    chat_queued: bool


@dataclass(frozen=True)
class NotifyPlan:
    """Everything a report decides from its body alone, each worked out once (`plan`): the row of the writing
    table, whether the job failed, the ticket's new link (after SUCCESS only), and the chat post."""

    status: str
    missing: int | None
    items: list[dict[str, Any]]
    move: writing_machine.NotifyMove
    # (link, where it came from) when the report sets the ticket's link (SUCCESS), else None.
    link: tuple[str | None, str] | None
    chat: str | None

    @classmethod
    def of(cls, body: dict[str, Any], *, site_url: str | None) -> NotifyPlan:
        status, missing, items = body["status"], body.get("missing"), body.get("items") or []
        move = writing_machine.notify_move(status)
        link = None
        title = None
        if status == PUBLISHED:
            last = next((item for item in reversed(items) if item.get("slug")), None)
            link = article_link(last, site_url)
            title = (last or {}).get("title") or (last or {}).get("slug")
        chat_text = chat_message(status, missing, items, link[0] if link else None, title=title) if move.chat else None
        return cls(status, missing, items, move, link, chat_text)

    @property
    def chat_word(self) -> str:
        return "queued" if self.chat is not None else "none"

    def run_details(self, actor: str) -> dict[str, Any]:
        """The `details` of the report's run of `writing-daily`."""
        return {
            "trigger": "notify",
            "actor": actor,
            "missing": self.missing,
            "items": self.items,
            "chat": self.chat_word,
        }

    def receipt_data(self, run_id: int, *, created: bool) -> dict[str, Any]:
        """What the receipt records of the report (the move itself is added where it is made)."""
        return {
            "status": self.status,
            "missing": self.missing,
            "items": len(self.items),
            "run": run_id,
            "chat": self.chat_word,
            **({"created": True, "from": None} if created else {}),
            **({"link": self.link[0], "link_from": self.link[1]} if self.link else {}),
        }


@dataclass
class _Toggle:
    state: str


class WritingAgent:
    def __init__(self, config: Config, clock: Clock, board: Board):
        self.config = config
        self.clock = clock
        self.board = board

    # -- notify ---------------------------------------------------------------------------------------------

    def notify(self, body: dict[str, Any], *, actor: str, idempotency_key: str | None) -> tuple[Report, bool]:
        """Record one report; return (what it did, replayed).

        With an `Idempotency-Key`, the report is kept with the key (its rows as their values) inside the
        transaction, and a repeated key gets that report back: the same rows, as they were, and nothing new.
        """
        plan = NotifyPlan.of(body, site_url=self.config.site_url)
        if idempotency_key is None:
            report = units.run(lambda: self._report(plan, actor=actor), what="recording the writing report")
            return report, False

        def work() -> tuple[dict[str, Any], bool]:
            return idempotency.once(
                IDEMPOTENCY_SCOPE,
                idempotency_key,
                body,
                lambda: _kept(self._report(plan, actor=actor)),
                now=self.clock(),
            )

        kept, replayed = units.run(work, what="recording the writing report")
        return _from_kept(kept), replayed

    def _report(self, plan: NotifyPlan, *, actor: str) -> Report:
        now = self.clock()
        row, created = self._writing_ticket(now)
        if plan.chat is not None:
            chat.queue(plan.chat, source=plan.status, at=now)
        run = runs.record(
            AGENT_ID,
            status=plan.status,
            ok=not plan.move.failed,
            started_at=now,
            finished_at=now,
            summary=run_summary(plan.status, plan.missing, len(plan.items)),
            details=plan.run_details(actor),
        )
        data = plan.receipt_data(run.id, created=created)
        change = None
        if plan.move.event is None:  # AUTOMATION_DISABLED: the receipt and the run, nothing moves
            data.update({"from": None if created else row.stage, "to": row.stage, "actor": actor})
            receipt = timeline.append(
                row.key,
                kind=RECEIPT_KIND,
                summary=f"{plan.status} from {actor}: the scheduled writing job did nothing (automation off); "
                "nothing moved",
                at=now,
                data=data,
            )
        else:

            def step(ticket: Ticket) -> str:
                writing_machine.apply_report(ticket, plan.move)
                return plan.move.event

            change = apply_stage_change(
                row,
                step,
                clock=self.clock,
                kind=RECEIPT_KIND,
                actor=actor,
                config=self.config,
                summary=receipt_summary(plan.status, actor, None if created else row.stage, plan.move, plan.missing),
                data=data,
                extra_changes={"link": plan.link[0]} if plan.link else None,
            )
            receipt = change.entry
        self._announce(row, change, created=created, actor=actor, at=now)
        return Report(self._shown(row), receipt, run, plan.chat is not None)

    def _announce(self, row: Ticket, change: StageChange | None, *, created: bool, actor: str, at: datetime) -> None:
        """Tell the board's listeners what this unit did to the writing ticket: that it was created (by `change`,
        when a report made it, else as it stands), or that `change` moved it; nothing when it did neither."""
        if created:
            if change is None:
                change = StageChange(row, None, row.stage, None, None, actor, at, "create")
            else:
                change = dataclasses.replace(change, from_stage=None, from_waiting_on=None)
        elif change is None or (change.to_stage, change.to_waiting_on) == (change.from_stage, change.from_waiting_on):
            return
        self.board.announce(change)

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
            self._announce(row, None, created=created, actor=actor, at=now)
            return AutomationState(now_enabled, now, actor)

        return units.run(work, what="changing writing automation")

    # -- what the content repository reads --------------------------------------------------------------------

    def content_repo_config(self) -> dict[str, Any]:
        return {
            "automation_enabled": automation.is_enabled(),
            "articles_per_day": ARTICLES_PER_DAY,
            "notify_url": self.config.writing_notify_url,
            "poll_schedule": AGENTS[AGENT_ID].schedule_text,
            "site_url": self.config.site_url,
        }


def _kept(report: Report) -> dict[str, Any]:
    """What a key keeps of a report: its rows' values. (An answer kept by the release before, the rendered body,
    reads back the same way: it showed each row's columns under their own names.)"""
    return {
        "ticket": row_values(Ticket, report.ticket),
        "receipt": row_values(TimelineEntry, report.receipt),
        "run": row_values(AgentRun, report.run),
        "chat": "queued" if report.chat_queued else "none",
    }


def _from_kept(kept: dict[str, Any]) -> Report:
    return Report(
        row_from(Ticket, kept["ticket"]),
        row_from(TimelineEntry, kept["receipt"]),
        row_from(AgentRun, kept["run"]),
        kept["chat"] == "queued",
    )


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


def article_link(last: dict[str, Any] | None, site_url: str | None) -> tuple[str | None, str]:
    """The ticket's link after SUCCESS, and where it came from, given the report's last item with a slug.

    `{SVC_SITE_URL}/writing/{slug}`. Without `SVC_SITE_URL` the item's own `url` is used when it is an absolute
    http(s) URL; otherwise the link is cleared, so the ticket never points at an older article.
    """
    if last is None:
        return None, "no item with a slug"
    if site_url:
        return f"{site_url.rstrip('/')}/writing/{quote(last['slug'], safe='')}", "SVC_SITE_URL"
    url = last.get("url") or ""
    if url.startswith(("https://", "http://")):
        return url, "item url (SVC_SITE_URL is unset)"
    return None, "SVC_SITE_URL is unset and the item has no absolute url"


def chat_message(
    status: str, missing: int | None, items: list[dict[str, Any]], link: str | None, *, title: str | None
) -> str:
    """The chat post for a report (cut to the chat limit by `domain.chat.queue`); after SUCCESS it names the
    article (`title`: the last item with a slug, by its title or slug)."""
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
    elif status == PUBLISHED:
        text = "✅ Writing: batch finalized and published"
        text += f": {title}" if title else "."
        if link:
            text += f" {link}"
    else:
        text = f"❌ Writing failed ({status}): fix the draft, QA or push, then run finalize-batch again."
        if count:
            text += f" {_articles(count)} missing."
    days = [item["date"] for item in items if item.get("date")]
    if days and status != PUBLISHED:
        shown = ", ".join(days[:CHAT_DAYS_SHOWN])
        more = f" and {len(days) - CHAT_DAYS_SHOWN} more" if len(days) > CHAT_DAYS_SHOWN else ""
        text += f" Days: {shown}{more}."
    return text
