"""The weekly digest (Monday 09:00 UTC): one chat message with the tickets done in the last 7 days, the
blocked tickets, the wallet and staging."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from domain import chat
from domain.clock import Clock, iso
from domain.ops import runs
from domain.ops.pulse import (
    StagingCheck,
    remember_staging,
    staging_line,
    staging_record,
    wallet_line,
    wallet_state,
)
from domain.ops.runs import Trigger
from integrations.staging import StagingResult
from storage import tickets
from storage.db import connection, transaction
from storage.models import AgentRun, Ticket

DIGEST_AGENT = "ops-weekly-digest"
WEEK = timedelta(days=7)
LISTED = 25


@dataclass(frozen=True)
class DigestReport:
    message: str
    posted: bool
    done: int
    blocked: int
    staging: StagingResult
    run: AgentRun


class WeeklyDigest:
    agent_id = DIGEST_AGENT

    def __init__(self, clock: Clock, *, staging_check: StagingCheck):
        self.clock = clock
        self.staging_check = staging_check

    def run(self, trigger: Trigger) -> DigestReport:
        """Compose the week's summary, queue it for chat, record the run."""
        with connection():
            started = self.clock()
            since = started - WEEK
            done_count = tickets.count_in_stage_since("done", since)
            done = tickets.in_stage_since("done", since, limit=LISTED)
            blocked_count = tickets.counts_by_stage().get("blocked", 0)
            blocked = tickets.in_stage_oldest_first("blocked", limit=LISTED)
            money = wallet_state()
            result = self.staging_check(self.clock())
            now = self.clock()
            message = _message(now, since, done, done_count, blocked, blocked_count, money, result)
            with transaction():
                remember_staging(result, at=now, by=self.agent_id)
                chat.queue(message, source="digest", at=now)
                run = runs.record(
                    self.agent_id,
                    trigger=trigger,
                    started_at=started,
                    finished_at=self.clock(),
                    status="POSTED",
                    ok=True,
                    summary=f"{done_count} done in 7 days, {blocked_count} blocked; "
                    f"wallet {money['percent_used']:.1f} %; staging {_staging_word(result)} (posted to chat)",
                    details={
                        "since": iso(since),
                        "done": [t.key for t in done],
                        "done_count": done_count,
                        "blocked": [t.key for t in blocked],
                        "blocked_count": blocked_count,
                        "wallet": money,
                        "staging": staging_record(result),
                    },
                )
        return DigestReport(chat.fit(message), True, done_count, blocked_count, result, run)


def _message(
    now: datetime,
    since: datetime,
    done: list[Ticket],
    done_count: int,
    blocked: list[Ticket],
    blocked_count: int,
    money: dict,
    result: StagingResult,
) -> str:
    lines = [f"**Weekly digest, {since:%d %b} to {now:%d %b %Y}**"]
    lines.append(f"Done this week ({done_count}):" if done_count else "Done this week: nothing")
    lines += [f"- {t.key} {t.title}" for t in done]
    if done_count > len(done):
        lines.append(f"- and {done_count - len(done)} more")
    lines.append(f"Blocked ({blocked_count}):" if blocked_count else "Blocked: none")
    lines += [f"- {t.key} {t.title} (blocked since {t.stage_changed_at:%d %b})" for t in blocked]
    if blocked_count > len(blocked):
        lines.append(f"- and {blocked_count - len(blocked)} more")
    lines.append(wallet_line(money))
    lines.append(staging_line(result))
    return "\n".join(lines)


def _staging_word(result: StagingResult) -> str:
    if result.skipped:
        return "skipped"
    return "OK" if result.ok else "FAILING"
