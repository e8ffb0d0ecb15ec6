from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from domain.ops.schedules import AGENTS, Cron

SUNDAY_NOON = datetime(2026, 11, 22, 12, 3, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "previous", "following"),
    [
        ("0 8 * * *", datetime(2026, 11, 22, 8, 0, tzinfo=UTC), datetime(2026, 11, 23, 8, 0, tzinfo=UTC)),
        ("0 9 * * 1", datetime(2026, 11, 16, 9, 0, tzinfo=UTC), datetime(2026, 11, 23, 9, 0, tzinfo=UTC)),
        ("0 9,18 * * *", datetime(2026, 11, 22, 9, 0, tzinfo=UTC), datetime(2026, 11, 22, 18, 0, tzinfo=UTC)),
        ("0 4 * * *", datetime(2026, 11, 22, 4, 0, tzinfo=UTC), datetime(2026, 11, 23, 4, 0, tzinfo=UTC)),
        ("*/15 * * * *", datetime(2026, 11, 22, 12, 0, tzinfo=UTC), datetime(2026, 11, 22, 12, 15, tzinfo=UTC)),
        ("0 0 * * 7", datetime(2026, 11, 22, 0, 0, tzinfo=UTC), datetime(2026, 11, 29, 0, 0, tzinfo=UTC)),
        # A step from a start: minutes 5, 15, ..., 55 (the hand-written parser read it as minute 5 alone).
        ("5/10 * * * *", datetime(2026, 11, 22, 11, 55, tzinfo=UTC), datetime(2026, 11, 22, 12, 5, tzinfo=UTC)),
        ("0 9 * * mon-fri", datetime(2026, 11, 20, 9, 0, tzinfo=UTC), datetime(2026, 11, 23, 9, 0, tzinfo=UTC)),
    ],
)
def test_previous_and_next(expression, previous, following):
    cron = Cron(expression)
    assert cron.previous(SUNDAY_NOON) == previous
    assert cron.next_after(SUNDAY_NOON) == following


def test_a_step_from_a_start_runs_every_step_of_the_hour():
    cron = Cron("5/10 * * * *")
    when, found = datetime(2026, 11, 22, 12, 0, tzinfo=UTC), []
    while (when := cron.next_after(when)).hour == 12:
        found.append(when.minute)
    assert found == [5, 15, 25, 35, 45, 55]


def test_an_exact_due_time_is_its_own_previous():
    moment = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
    assert Cron("0 8 * * *").previous(moment) == moment
    assert Cron("0 8 * * *").next_after(moment) == moment + timedelta(days=1)


def test_other_time_zones_are_converted_not_trusted():
    tokyo = datetime(2026, 11, 22, 17, 30, tzinfo=ZoneInfo("Asia/Tokyo"))  # 08:30 UTC
    assert Cron("0 8 * * *").previous(tokyo) == datetime(2026, 11, 22, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "bad", ["0 8 * *", "0 0 8 * * *", "61 * * * *", "0 25 * * *", "x * * * *", "0 8 * * 8", "0 0 30 2 *"]
)
def test_bad_expressions_are_refused(bad):
    with pytest.raises(ValueError):
        Cron(bad)


def test_the_seed_schedules():
    assert AGENTS["ops-daily-pulse"].schedule_text == "0 8 * * *"
    assert AGENTS["ops-weekly-digest"].schedule_text == "0 9 * * 1"
    assert AGENTS["writing-daily"].schedule_text == "0 9,18 * * *"
    assert AGENTS["idle-reclaim"].schedule_text == "0 4 * * *"
    assert AGENTS["archivist"].schedule_text == "30 3 * * *"
    assert set(AGENTS) == {
        "writing-daily",
        "ops-daily-pulse",
        "ops-weekly-digest",
        "slot-steward",
        "idle-reclaim",
        "archivist",
        "poller",
        "reconciler",
    }


def test_each_schedule_in_plain_words():
    assert {agent_id: plan.schedule_in_words for agent_id, plan in AGENTS.items()} == {
        "writing-daily": "At 09:00 and 18:00 every day (UTC)",
        "ops-daily-pulse": "At 08:00 every day (UTC)",
        "ops-weekly-digest": "At 09:00 on Monday (UTC)",
        "slot-steward": "At 08:00 every day (UTC)",
        "idle-reclaim": "At 04:00 every day (UTC)",
        "archivist": "At 03:30 every day (UTC)",
        "poller": "Every 5 minutes",
        "reconciler": "Every 10 minutes",
    }
    assert Cron("5/10 * * * *").explained == "Every 10th minute from 5 through 59 of every hour"


def test_late_means_overdue_beyond_grace_and_never_run_is_not_late():
    pulse = AGENTS["ops-daily-pulse"]
    ran_yesterday = datetime(2026, 11, 21, 8, 0, 5, tzinfo=UTC)
    assert not pulse.is_late(datetime(2026, 11, 22, 9, 0, tzinfo=UTC), ran_yesterday)  # within 2 h grace
    assert pulse.is_late(datetime(2026, 11, 22, 10, 30, tzinfo=UTC), ran_yesterday)
    assert not pulse.is_late(datetime(2026, 11, 22, 10, 30, tzinfo=UTC), None)
