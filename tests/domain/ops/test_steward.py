"""The slot steward and idle reclaim, with a real wipe command, seen through the board."""

import threading

import pytest

from domain.ops.agents import OpsAgents
from domain.ops.runs import Trigger
from jobs import assembly
from jobs.delivery import OutboxDeliverer
from storage import outbox, slots
from storage.db import connection, transaction

from board import BoardClient
from processes import wait_until
from servers.bays import BayWiper


@pytest.fixture
def wiper(tmp_path):
    return BayWiper(tmp_path / "bays")


@pytest.fixture
def config(config_factory, wiper):
    return config_factory(bay_wipe_command=wiper.command)


@pytest.fixture
def board(api):
    return BoardClient(api)


@pytest.fixture
def ops(app, config, clock):
    return OpsAgents(config, clock)


def finish_without_release(board, key, how="mark_done"):
    """Mark done or cancel, then drop the queued slot_release, so the steward run under test finds the claim."""
    getattr(board, how)(key)
    with connection(), transaction():
        for message in outbox.recent(kind="slot_release"):
            message.delete_instance()


# -- the slot steward ---------------------------------------------------------------------------------------


def test_the_steward_wipes_and_releases_slots_of_done_and_cancelled_tickets_only(board, ops, wiper):
    for key, slot in (("PORT-1", "bay-1"), ("PORT-2", "bay-2"), ("PORT-3", "bay-3")):
        board.ticket(key)
        board.claim(slot, key)
    finish_without_release(board, "PORT-1", "mark_done")
    finish_without_release(board, "PORT-2", "cancel")

    report = ops.slot_steward(Trigger("api"))

    assert sorted((o.slot, o.ticket) for o in report.released) == [("bay-1", "PORT-1"), ("bay-2", "PORT-2")]
    assert sorted(wiper.wiped) == ["bay-1", "bay-2"]
    held = {name: s["ticket"] for name, s in board.slots().items()}
    assert held == {"bay-1": None, "bay-2": None, "bay-3": "PORT-3"}
    for key, stage in (("PORT-1", "done"), ("PORT-2", "cancelled")):
        ticket = board.get(key)
        assert ticket["stage"] == stage  # unchanged
        assert ticket["assigned_slot"] is None
        entry = board.timeline(key)[0]
        assert entry["kind"] == "slot_released"
        assert entry["data"]["wipe"]["exit_code"] == 0
        assert entry["data"]["wipe"]["output"] == f"wiped {entry['data']['slot']}"
    assert board.get("PORT-3")["assigned_slot"] == "bay-3"
    run = board.runs("slot-steward")[0]
    assert (run["status"], run["ok"]) == ("RELEASED", True)
    assert "bay-1 (PORT-1)" in run["summary"]


def test_a_failed_wipe_keeps_the_claim_and_the_next_run_tries_again(board, ops, wiper):
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    finish_without_release(board, "PORT-1")
    wiper.fail("bay-1")

    first = ops.slot_steward(Trigger("api"))
    assert first.released == [] and [o.slot for o in first.failed] == ["bay-1"]
    assert board.slots()["bay-1"]["ticket"] == "PORT-1"
    assert board.get("PORT-1")["assigned_slot"] == "bay-1"
    entry = board.timeline("PORT-1")[0]
    assert entry["kind"] == "slot_wipe_failed"
    assert entry["data"]["wipe"]["exit_code"] == 7
    assert "bay unreachable" in entry["data"]["wipe"]["output"]
    run = board.runs("slot-steward")[0]
    assert (run["status"], run["ok"]) == ("WIPE_FAILED", False)

    wiper.heal("bay-1")
    second = ops.slot_steward(Trigger("api"))
    assert [o.slot for o in second.released] == ["bay-1"]
    assert board.slots()["bay-1"]["ticket"] is None


def test_without_a_wipe_command_the_wipe_is_recorded_only(config_factory, app_factory, clock):
    from conftest import BASIC, CI_SECRET
    from testclient import ApiClient

    config = config_factory(bay_wipe_command=None)
    board = BoardClient(ApiClient(app_factory(config), basic=BASIC, ci_secret=CI_SECRET))
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    finish_without_release(board, "PORT-1")
    report = OpsAgents(config, clock).slot_steward(Trigger("api"))
    assert [o.slot for o in report.released] == ["bay-1"]
    entry = board.timeline("PORT-1")[0]
    assert "wipe recorded only" in entry["summary"]
    assert entry["data"]["wipe"]["ran"] is False


def test_nothing_to_release_is_still_a_recorded_run(board, ops):
    report = ops.slot_steward(Trigger("api"))
    assert report.outcomes == []
    assert board.runs("slot-steward")[0]["status"] == "NOTHING_TO_RELEASE"


@pytest.mark.both_backends
def test_two_stewards_at_once_wipe_and_release_a_slot_once(board, ops, wiper, config, clock):
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    finish_without_release(board, "PORT-1")
    wiper.hold()
    other = OpsAgents(config, clock)
    first: list = []
    worker = threading.Thread(target=lambda: first.append(ops.slot_steward(Trigger("api"))))
    worker.start()
    wait_until(lambda: wiper.started("bay-1"), what="the first wipe to start")

    second = other.slot_steward(Trigger("api"))  # while the first still wipes
    assert [(o.outcome, o.detail) for o in second.outcomes] == [("skipped", "another wipe of this bay is in progress")]
    wiper.release()
    worker.join(timeout=30)
    assert [o.slot for o in first[0].released] == ["bay-1"]
    assert wiper.wiped == ["bay-1"]
    assert board.kinds("PORT-1").count("slot_released") == 1


# -- mark_done / cancel: the slot_release outbox message runs the steward for that ticket ------------------


def deliver(ops, clock):
    handlers, recorders = assembly.outbox_handlers(ops.config, clock)
    return OutboxDeliverer(handlers, clock, recorders=recorders).drain(kinds=["slot_release"])


@pytest.mark.parametrize("action", ["mark_done", "cancel"])
def test_mark_done_and_cancel_release_the_slot_through_the_outbox(board, ops, wiper, clock, action):
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    getattr(board, action)("PORT-1")
    assert board.slots()["bay-1"]["ticket"] == "PORT-1"  # the wipe happens after the commit, not in the request

    assert deliver(ops, clock) == 1
    assert wiper.wiped == ["bay-1"]
    assert board.slots()["bay-1"]["ticket"] is None
    assert board.get("PORT-1")["assigned_slot"] is None
    run = board.runs("slot-steward")[0]
    assert run["details"]["trigger"] == action and run["details"]["ticket"] == "PORT-1"


def test_a_release_that_keeps_failing_is_left_to_the_next_pulse(board, ops, wiper, clock):
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    wiper.fail("bay-1")
    board.mark_done("PORT-1")
    for wait in (0, 5, 15, 60):
        clock.advance(seconds=wait)
        assert deliver(ops, clock) == 1
    with connection():
        message = outbox.recent(kind="slot_release")[0]
    assert message.status == "failed" and "next pulse" in message.last_error
    assert board.kinds("PORT-1").count("slot_wipe_failed") == 4
    assert board.slots()["bay-1"]["ticket"] == "PORT-1"  # the claim is kept

    wiper.heal("bay-1")
    report = ops.pulse(Trigger("schedule"), post_to_chat="never")
    assert [(o.slot, o.ticket) for o in report.steward.released] == [("bay-1", "PORT-1")]


# -- idle reclaim -------------------------------------------------------------------------------------------


def test_idle_reclaim_wipes_bays_idle_for_more_than_24_hours(board, ops, wiper, clock):
    board.ticket("PORT-1")
    board.claim("bay-held", "PORT-1")  # held by a live ticket
    with connection(), transaction():
        slots.ensure("bay-idle", at=clock())  # a bay nobody has used or wiped since
    clock.advance(hours=1)
    with connection(), transaction():
        slots.ensure("bay-recent", at=clock())
    clock.advance(hours=23, minutes=30)  # bay-idle and bay-held: 24.5 h; bay-recent: 23.5 h

    report = ops.idle_reclaim(Trigger("schedule"))

    assert wiper.wiped == ["bay-idle"]
    assert [(o.slot, o.outcome) for o in report.outcomes] == [("bay-held", "skipped"), ("bay-idle", "wiped")]
    assert board.slots()["bay-held"]["ticket"] == "PORT-1"
    assert board.get("PORT-1")["stage"] == "execute"  # unchanged
    assert board.slots()["bay-idle"]["last_wiped_at"] == "2026-11-21T10:30:00.000000Z"
    run = board.runs("idle-reclaim")[0]
    assert run["status"] == "WIPED"
    assert "bay-held (held by PORT-1 (execute)" in run["summary"]

    again = ops.idle_reclaim(Trigger("schedule"))
    assert [o.outcome for o in again.outcomes] == ["skipped"]  # bay-held again; bay-idle is clean now
    assert wiper.wiped == ["bay-idle"]


def test_idle_reclaim_releases_an_idle_bay_whose_ticket_finished(board, ops, wiper, clock):
    board.ticket("PORT-1")
    board.claim("bay-1", "PORT-1")
    wiper.fail("bay-1")
    board.cancel("PORT-1")
    ops.slot_steward(Trigger("api"))  # fails, the claim stays
    wiper.heal("bay-1")
    clock.advance(hours=25)
    report = ops.idle_reclaim(Trigger("schedule"))
    assert [(o.slot, o.ticket, o.outcome) for o in report.outcomes] == [("bay-1", "PORT-1", "released")]
    assert board.slots()["bay-1"]["ticket"] is None
    assert board.get("PORT-1")["stage"] == "cancelled"


@pytest.mark.both_backends
def test_a_bay_being_wiped_cannot_be_claimed_until_the_wipe_is_done(board, ops, wiper, clock):
    board.ticket("PORT-1")
    with connection(), transaction():
        slots.ensure("bay-1", at=clock())
    clock.advance(hours=25)
    wiper.hold()
    worker = threading.Thread(target=lambda: ops.idle_reclaim(Trigger("schedule")))
    worker.start()
    wait_until(lambda: wiper.started("bay-1"), what="the wipe to start")

    refused = board.api.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-1"})
    assert refused.status_code == 409
    assert "being wiped" in refused.json["detail"]

    wiper.release()
    worker.join(timeout=30)
    assert board.claim("bay-1", "PORT-1")["ticket"] == "PORT-1"
