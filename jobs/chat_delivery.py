"""The outbox handler for chat posts (kind `chat`): each queued post goes to the Discord webhook, paced.

Pacing has two parts, both kept in the database so that they hold across restarts and across several jobs
processes:

- what Discord said: a 429 (the `TransportError`'s `retry_after`) or an answer, sent or refused, whose
  `X-RateLimit-Remaining` is 0 (its `rate`, `X-RateLimit-Reset-After`) closes the webhook until then, in the setting
  `chat.pace.<webhook fingerprint>`;
- a rolling minute: Discord allows 30 posts a minute per webhook, a limit its headers do not announce, so at
  most `PER_MINUTE` chat posts go out in any 60 seconds, counted from the outbox's own `sent_at`.

A post held back by pacing is deferred (no failed attempt is counted); Discord's refusals are `TransportError`s,
as every target's (`Outcome.failed`): a 429 is a failed attempt retried after its `retry_after`; 5xx, timeouts and
connection errors follow the outbox backoff (a 5xx's own `Retry-After`, if it sends one); 404 and other 4xx give
up. With no `DISCORD_WEBHOOK_URL` a post is marked `skipped`: recorded, not sent.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from domain import chat
from domain.clock import Clock, iso, parse_timestamp
from domain.config import Config
from integrations import discord
from integrations.transport import RateLimit, TransportError
from jobs.delivery import Attempt, Outcome
from storage import outbox, settings
from storage.db import transaction

# Five below Discord's 30 a minute per webhook: our clock and Discord's never agree to the millisecond.
PER_MINUTE = 25
WINDOW = timedelta(minutes=1)
PACE_SETTING_PREFIX = "chat.pace."
NOT_CONFIGURED = "recorded, not sent: DISCORD_WEBHOOK_URL is unset"


def pace_setting(url: str) -> str:
    """The setting that holds a webhook's closed-until time, named by a fingerprint (the URL holds a token)."""
    return PACE_SETTING_PREFIX + hashlib.sha256(url.encode()).hexdigest()[:16]


class ChatDelivery:
    """Handler for outbox kind `chat` (payload `{"content", "source"}`)."""

    def __init__(
        self,
        config: Config,
        clock: Clock,
        *,
        webhook: discord.DiscordWebhook | None = None,
        per_minute: int = PER_MINUTE,
    ):
        url = config.discord_webhook_url
        self.clock = clock
        self.per_minute = per_minute
        self.webhook = webhook if webhook is not None else (discord.DiscordWebhook(url) if url else None)
        self.pace_key = pace_setting(url) if url else None

    def __call__(self, attempt: Attempt) -> Outcome:
        if self.webhook is None:
            return Outcome.skipped(NOT_CONFIGURED)
        content = attempt.payload.get("content")
        if not isinstance(content, str) or not content.strip():
            return Outcome.give_up("the chat message has no content")
        wait, why = self.wait()
        if wait > 0:
            return Outcome.defer(why, after=wait)
        try:
            posted = self.webhook.execute(content)
        except TransportError as exc:
            self._learn(exc.rate, rate_limited_for=exc.retry_after if exc.rate_limited else None)
            return Outcome.failed(exc)
        self._learn(posted.rate)
        return Outcome.sent(posted.detail, message_id=posted.message_id)

    def wait(self) -> tuple[float, str]:
        """Seconds to hold the next post back (0: send now), and why."""
        now = self.clock()
        row = settings.get(self.pace_key) if self.pace_key else None
        recent = outbox.sent_since(chat.KIND, now - WINDOW, limit=self.per_minute)
        waits = [(0.0, "")]
        if row is not None and row.value.get("closed_until"):
            closed_until = parse_timestamp(row.value["closed_until"])
            waits.append(((closed_until - now).total_seconds(), f"paced: {row.value.get('reason', 'rate limit')}"))
        if len(recent) >= self.per_minute:
            reopens = recent[-1] + WINDOW
            waits.append(((reopens - now).total_seconds(), f"paced: {self.per_minute} chat posts in the last minute"))
        return max(waits)

    def _learn(self, rate: RateLimit | None, *, rate_limited_for: float | None = None) -> None:
        """Close the webhook for as long as Discord asked (a 429's wait, or an empty bucket's reset), for every
        process that shares this database."""
        if rate_limited_for:
            seconds, reason = rate_limited_for, f"Discord answered 429, retry after {rate_limited_for:g}s"
        elif rate is not None and rate.exhausted_for():
            seconds = rate.exhausted_for()
            reason = f"Discord's rate limit bucket is empty for {seconds:g}s (X-RateLimit-Remaining: 0)"
        else:
            return
        now = self.clock()
        with transaction():
            settings.put(
                self.pace_key,
                {"closed_until": iso(now + timedelta(seconds=seconds)), "reason": reason},
                at=now,
                by="chat-delivery",
            )
