"""The weekly digest: one chat message with the week's done tickets, the blocked ones, the wallet and staging."""

import pytest

from domain.ops.agents import OpsAgents
from domain.ops.runs import Trigger
from storage import outbox
from storage.db import connection

from board import BoardClient

pytestmark = pytest.mark.both_backends


@pytest.fixture
def board(api):
    return BoardClient(api)


def test_the_digest_is_one_chat_message_with_the_week(board, api, config, clock):
    board.ticket("PORT-1")
    board.mark_done("PORT-1")  # eight days before the digest: last week
    clock.advance(days=6)
    board.ticket("PORT-2")
    board.ticket("PORT-3", stage="blocked")
    board.ticket("PORT-4", stage="execute")
    clock.advance(days=2)
    board.mark_done("PORT-2")
    api.put("/api/v1/wallet", json={"budget": 200, "spent": 50, "locked": False})

    report = OpsAgents(config, clock).weekly_digest(Trigger("schedule"))

    assert report.posted and report.done == 1 and report.blocked == 1
    assert report.message.splitlines() == [
        "**Weekly digest, 21 Nov to 28 Nov 2026**",
        "Done this week (1):",
        "- PORT-2 Work on PORT-2",
        "Blocked (1):",
        "- PORT-3 Work on PORT-3 (blocked since 26 Nov)",
        "Wallet: 25.0 % used (50.00 of 200.00)",
        "Staging: check skipped (SVC_STAGING_URL is not set)",
    ]
    with connection():
        (post,) = outbox.recent(kind="chat")
    assert post.payload == {"content": report.message, "source": "digest"}
    assert (report.run.agent_id, report.run.status, report.run.ok) == ("ops-weekly-digest", "POSTED", True)
    assert report.run.details["done"] == ["PORT-2"] and report.run.details["blocked"] == ["PORT-3"]


def test_a_quiet_week_still_gets_its_digest(app, config, clock):
    report = OpsAgents(config, clock).weekly_digest(Trigger("api"))
    assert "Done this week: nothing" in report.message and "Blocked: none" in report.message
    with connection():
        assert len(outbox.recent(kind="chat")) == 1


def test_a_long_week_is_cut_to_the_chat_limit(board, config, clock):
    for n in range(60):
        board.ticket(f"PORT-{n}")
        board.mark_done(f"PORT-{n}")
    report = OpsAgents(config, clock).weekly_digest(Trigger("api"))
    assert len(report.message) <= 2000
    assert "- and 35 more" in report.message
