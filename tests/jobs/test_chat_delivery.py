"""Chat posts delivered to a local server shaped like Discord's webhook endpoint: once each, mentions disabled,
within the limit, paced by what Discord says, retried or given up as the answer deserves."""

import io
import json
import logging
from datetime import timedelta

import pytest

from domain import chat
from integrations.discord import DiscordWebhook
from jobs import assembly
from jobs.chat_delivery import PER_MINUTE, ChatDelivery
from jobs.delivery import BACKOFF, OutboxDeliverer
from storage import outbox
from storage.db import connection, transaction
from svc import logs

from processes import free_port, wait_until
from servers.discord import FakeDiscord


@pytest.fixture
def discord(clock):
    with FakeDiscord(clock=clock) as server:
        yield server


@pytest.fixture
def chat_config(config_factory, discord):
    return config_factory(discord_webhook_url=discord.url)


def deliverer(config, clock, *, webhook=None, **kwargs):
    return OutboxDeliverer({"chat": ChatDelivery(config, clock, webhook=webhook, **kwargs)}, clock)


def queue(clock, *contents):
    with connection(), transaction():
        return [chat.queue(c, source="test", at=clock()).id for c in contents]


def fate(message_id):
    with connection():
        m = outbox.get(message_id)
    return {"status": m.status, "attempts": m.attempts, "last_error": m.last_error, "next": m.next_attempt_at}


def test_each_post_arrives_once_with_mentions_disabled_and_wait_true(app, clock, discord, chat_config):
    ids = queue(clock, "first", "@everyone look <@123456> and <@&654321>", "third")
    jobs = deliverer(chat_config, clock)

    assert jobs.drain() == 3
    assert jobs.drain() == 0

    assert discord.contents() == ["first", "@everyone look <@123456> and <@&654321>", "third"]
    assert all(r["body"]["allowed_mentions"] == {"parse": []} for r in discord.requests)
    assert all(r["query"]["wait"] == ["true"] for r in discord.requests)
    assert all(r["headers"]["Content-Type"] == "application/json" for r in discord.requests)
    assert [fate(i)["status"] for i in ids] == ["sent"] * 3
    assert [fate(i)["attempts"] for i in ids] == [1] * 3


def test_content_is_within_the_limit_even_when_queued_too_long(app, clock, discord, chat_config):
    queue(clock, "a" * 5000)
    with connection(), transaction():
        outbox.enqueue("chat", {"content": "b" * 3000, "source": "raw"}, at=clock())  # bypassing chat.queue
    deliverer(chat_config, clock).drain()
    assert [len(c) for c in discord.contents()] == [2000, 2000]
    assert all(c.endswith("…") for c in discord.contents())


def test_a_429_is_honoured_with_its_fractional_retry_after_and_holds_the_webhook(app, clock, discord, chat_config):
    first, second = queue(clock, "one", "two")
    discord.answer_next(
        429,
        body={"message": "You are being rate limited.", "retry_after": 1.5, "global": False},
        headers={"Retry-After": "2", "X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0"},
    )
    jobs = deliverer(chat_config, clock)

    jobs.drain()

    assert fate(first)["status"] == "pending" and fate(first)["attempts"] == 1
    assert fate(first)["next"] == clock() + timedelta(seconds=1.5)
    assert "429" in fate(first)["last_error"]
    # the second post was not even tried while the webhook is closed: no attempt counted
    assert fate(second)["attempts"] == 0 and fate(second)["next"] == clock() + timedelta(seconds=1.5)
    assert len(discord.requests) == 1
    clock.advance(seconds=1.5)
    jobs.drain()
    assert discord.contents() == ["one", "two"]
    assert [fate(first)["status"], fate(second)["status"]] == ["sent", "sent"]


def test_a_429_without_a_json_body_uses_the_retry_after_header(app, clock, discord, chat_config):
    (only,) = queue(clock, "one")
    discord.answer_next(429, body="<html>rate limited</html>", headers={"Retry-After": "3"})
    deliverer(chat_config, clock).drain()
    assert fate(only)["next"] == clock() + timedelta(seconds=3)


def test_the_rate_limit_headers_pace_posts_so_discord_never_has_to_refuse(app, clock, discord, chat_config):
    ids = queue(clock, *[f"post {n}" for n in range(12)])
    jobs = deliverer(chat_config, clock)

    jobs.drain()
    assert len(discord.messages) == 5  # the bucket said Remaining: 0, Reset-After: 2
    assert [fate(i)["attempts"] for i in ids[5:]] == [0] * 7
    clock.advance(seconds=2)
    jobs.drain()
    assert len(discord.messages) == 10
    clock.advance(seconds=2)
    jobs.drain()

    assert discord.contents() == [f"post {n}" for n in range(12)]
    assert discord.rate_limited == 0


def test_no_more_than_the_pace_go_out_in_any_minute(app, clock, chat_config):
    # a roomy bucket, so only the 30-a-minute limit (which no header announces) matters
    with FakeDiscord(clock=clock, bucket_limit=1000) as discord:
        config = chat_config.__class__(**{**chat_config.__dict__, "discord_webhook_url": discord.url})
        queue(clock, *[f"post {n}" for n in range(60)])
        jobs = deliverer(config, clock)
        for _ in range(60):
            jobs.drain()
            if len(discord.messages) == 60:
                break
            clock.advance(seconds=5)

        assert discord.contents() == [f"post {n}" for n in range(60)]
        assert discord.rate_limited == 0
        times = [m["received_at"] for m in discord.messages]
        busiest = max(sum(1 for t in times if start <= t < start + timedelta(minutes=1)) for start in times)
        assert busiest == PER_MINUTE < 30


@pytest.mark.both_backends
def test_pacing_holds_across_a_restart(app, clock, discord, chat_config):
    queue(clock, *[f"post {n}" for n in range(5)])
    deliverer(chat_config, clock).drain()  # the fifth answer said the bucket is empty for 2 s
    (later,) = queue(clock, "after the restart")

    restarted = deliverer(chat_config, clock)  # a new process: nothing in memory
    restarted.drain()

    assert len(discord.requests) == 5 and fate(later)["status"] == "pending" and fate(later)["attempts"] == 0
    clock.advance(seconds=2)
    restarted.drain()
    assert discord.contents()[-1] == "after the restart"


def test_a_5xx_is_retried_with_the_outbox_backoff_and_arrives_once(app, clock, discord, chat_config):
    (only,) = queue(clock, "hello")
    discord.answer_next(502, body={"message": "Bad Gateway"})
    jobs = deliverer(chat_config, clock)
    jobs.drain()
    assert fate(only)["status"] == "pending" and fate(only)["attempts"] == 1
    assert fate(only)["next"] == clock() + timedelta(seconds=BACKOFF[0])
    assert "502" in fate(only)["last_error"]
    clock.advance(seconds=BACKOFF[0])
    jobs.drain()
    assert discord.contents() == ["hello"] and fate(only)["status"] == "sent" and fate(only)["attempts"] == 2


def test_a_deleted_webhook_404_is_given_up_and_recorded(app, clock, config_factory, discord):
    config = config_factory(discord_webhook_url=discord.url.replace(discord.token, "revoked-token-000000000000"))
    (only,) = queue(clock, "hello")
    deliverer(config, clock).drain()
    outcome = fate(only)
    assert outcome["status"] == "failed" and outcome["attempts"] == 1
    assert "404" in outcome["last_error"] and "Unknown Webhook" in outcome["last_error"]
    clock.advance(days=2)
    assert deliverer(config, clock).drain() == 0  # never tried again


def test_another_4xx_is_given_up(app, clock, discord, chat_config):
    (only,) = queue(clock, "hello")
    discord.answer_next(400, body={"message": "Invalid Form Body", "code": 50035})
    deliverer(chat_config, clock).drain()
    assert fate(only)["status"] == "failed" and "Invalid Form Body" in fate(only)["last_error"]


def test_a_connection_error_is_retried(app, clock, config_factory):
    config = config_factory(discord_webhook_url=f"http://127.0.0.1:{free_port()}/api/webhooks/1/secret-token-xyz")
    (only,) = queue(clock, "hello")
    deliverer(config, clock).drain()
    assert fate(only)["status"] == "pending" and fate(only)["attempts"] == 1
    assert "could not connect" in fate(only)["last_error"]


def test_a_slow_answer_within_the_timeout_is_sent(app, clock, discord, chat_config):
    (only,) = queue(clock, "hello")
    discord.answer_next(delay=0.3)
    deliverer(chat_config, clock, webhook=DiscordWebhook(discord.url, timeout=(2.0, 2.0))).drain()
    assert fate(only)["status"] == "sent" and discord.contents() == ["hello"]


def test_an_answer_slower_than_the_timeout_is_a_transient_failure(app, clock, discord, chat_config):
    (only,) = queue(clock, "hello")
    discord.answer_next(delay=1.0)
    deliverer(chat_config, clock, webhook=DiscordWebhook(discord.url, timeout=(2.0, 0.2))).drain()
    outcome = fate(only)
    assert outcome["status"] == "pending" and outcome["attempts"] == 1 and "timed out" in outcome["last_error"]
    # Discord may still create the message it was slow to confirm: the retry makes delivery at least once.
    wait_until(lambda: len(discord.messages) == 1, timeout=5, what="the slow answer to finish")


def test_without_a_webhook_posts_are_recorded_not_sent(app, clock, config):
    (only,) = queue(clock, "hello")
    assert deliverer(config, clock).drain() == 1
    outcome = fate(only)
    assert outcome["status"] == "skipped" and outcome["attempts"] == 0
    assert outcome["last_error"] == "recorded, not sent: DISCORD_WEBHOOK_URL is unset"


def test_the_jobs_process_delivers_chat_posts(chat_config, clock):
    handlers, _ = assembly.outbox_handlers(chat_config, clock)
    assert isinstance(handlers["chat"], ChatDelivery) and handlers["chat"].webhook is not None


def test_the_webhook_url_and_its_token_never_reach_logs_or_errors(app, clock, config_factory, discord):
    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    closed_port = f"http://127.0.0.1:{free_port()}/api/webhooks/{discord.webhook_id}/{discord.token}"
    try:
        for url in (discord.url, closed_port):
            config = config_factory(discord_webhook_url=url, log_level="DEBUG")
            logs.configure("DEBUG", secrets=logs.secrets_of(config), stream=stream)
            discord.answer_next(500)
            discord.answer_next(429, body={"retry_after": 0.5, "global": False, "message": "slow down"})
            queue(clock, "a", "b")
            jobs = deliverer(config, clock)
            for _ in range(4):
                jobs.drain()
                clock.advance(seconds=BACKOFF[0])
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    output = stream.getvalue()
    assert "outbox delivery" in output  # the deliveries were logged...
    assert discord.token not in output  # ...without the token
    with connection():
        notes = [m.last_error or "" for m in outbox.recent(kind="chat")]
    assert notes and not any(discord.token in n for n in notes)
    assert any("could not connect to http://127.0.0.1" in n and "/webhooks/" in n for n in notes)
    assert json.loads(output.splitlines()[0])  # still JSON lines


def test_a_webhook_url_must_be_https_or_loopback_and_the_refusal_hides_the_token():
    with pytest.raises(ValueError) as refused:
        DiscordWebhook("http://chat.example.com/api/webhooks/1/very-secret-token")
    assert "very-secret-token" not in str(refused.value)
    DiscordWebhook("https://discord.com/api/webhooks/1/token")
    DiscordWebhook("http://[::1]:9/api/webhooks/1/token")
