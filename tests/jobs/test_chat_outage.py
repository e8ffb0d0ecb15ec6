"""Side effects survive outages: reports keep arriving while chat is down — first nothing listens (connection
refused), then Discord answers 500, then 429 with `retry_after` — and once it is back every chat post arrives,
none twice.

The jobs process is the one `svc jobs` runs (`jobs.assembly.build`), with the test's clock: the outbox backoff
reaches an hour between tries during this outage, which an injected clock crosses at once.
"""

from collections import Counter
from datetime import timedelta

import pytest

from jobs import assembly
from storage import outbox
from storage.db import connection
from storage.models import OutboxMessage

from conftest import BASIC, CI_SECRET
from processes import free_port
from servers.discord import FakeDiscord
from testclient import ApiClient

pytestmark = pytest.mark.both_backends

NOTIFY = "/api/v1/agents/writing/notify"
WEBHOOK_ID = "112233445566778899"
TOKEN = "outage-token-0123456789abcdef-0123456789"


def chat_messages() -> list[OutboxMessage]:
    with connection():
        return list(OutboxMessage.select().where(OutboxMessage.kind == "chat").order_by(OutboxMessage.id))


def next_due(clock):
    pending = [m.next_attempt_at for m in chat_messages() if m.status == outbox.PENDING]
    return max(min(pending), clock()) if pending else None


def test_every_chat_post_arrives_once_after_refused_500_and_429_outages(app_factory, config_factory, clock):
    port = free_port()  # nothing listens here until Discord "comes back"
    config = config_factory(discord_webhook_url=f"http://127.0.0.1:{port}/api/webhooks/{WEBHOOK_ID}/{TOKEN}")
    api = ApiClient(app_factory(config), basic=BASIC, ci_secret=CI_SECRET)
    jobs = assembly.build(config, clock)
    reported = 0

    def report(status: str) -> None:
        nonlocal reported
        reported += 1
        answer = api.post(NOTIFY, auth="ci", json={"status": status, "missing": reported})
        assert answer.status_code == 200 and answer.json["chat"] == "queued"

    def tick() -> None:
        """Move the clock to the next due try and let the jobs process drain, as its loop would."""
        due = next_due(clock)
        assert due is not None, "nothing left to deliver"
        clock.move_to(due)
        jobs.drain()

    def first_attempts() -> int:
        return chat_messages()[0].attempts

    discord = None
    try:
        # Connection refused: four tries of the first post; reports keep arriving meanwhile.
        report("BACKFILL_READY")
        jobs.drain()
        report("FAIL_QA")
        while first_attempts() < 4:
            tick()
        assert "could not connect" in chat_messages()[0].last_error
        report("STOP_NEED_TOPICS")

        # Discord answers, but with 500s, until the first post waits an hour between tries.
        discord = FakeDiscord(clock=clock, webhook_id=WEBHOOK_ID, token=TOKEN, port=port).start()
        discord.answer_next(500, body={"message": "500: Internal Server Error", "code": 0}, times=1000)
        while first_attempts() < 7:
            tick()
        first = chat_messages()[0]
        assert first.next_attempt_at - clock() >= timedelta(hours=1)  # the backoff reached hours
        assert "500" in first.last_error
        report("SUCCESS")

        # Then 429s with a retry_after, which close the webhook for every post until it has passed.
        discord.answer_normally()
        limited = {"message": "You are being rate limited.", "retry_after": 42.5, "global": False}
        discord.answer_next(429, body=limited, headers={"Retry-After": "43"}, times=2)
        before = len(discord.requests)
        while len(discord.requests) < before + 2:
            tick()
        assert any("429" in (m.last_error or "") for m in chat_messages())
        report("FAIL_PUSH")

        # Back: everything queued arrives, each once.
        for _ in range(50):
            if next_due(clock) is None:
                break
            tick()
        queued = [m.payload["content"] for m in chat_messages()]
        assert len(queued) == reported == 5
        assert Counter(discord.contents()) == Counter(queued)
        assert [m.status for m in chat_messages()] == ["sent"] * 5
        assert max(m.attempts for m in chat_messages()) <= 10  # never given up
        # 500s and 429s reached the server without creating a message; only the final tries did.
        assert len(discord.requests) > len(discord.messages) == 5
    finally:
        if discord is not None:
            discord.stop()
