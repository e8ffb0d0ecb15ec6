"""The generic ticket machine, move by move (the README's table)."""

import pytest

from machines import ticket as ticket_machine
from machines.errors import TransitionForbidden
from machines.stages import LIVE_STAGES, STAGES

ALLOWED = {
    "agreement": {"queued"},
    "queued": {"execute", "blocked"},
    "execute": {"ci", "queued", "blocked"},
    "ci": {"execute", "human_test", "blocked"},
    "human_test": {"human_merge", "execute", "blocked"},
    "human_merge": {"ship", "execute", "blocked"},
    "ship": {"done", "blocked"},
    "blocked": {"queued", "execute"},
    "done": set(),
    "cancelled": set(),
}


class Row:
    def __init__(self, stage, key="PORT-1"):
        self.key = key
        self.stage = stage


@pytest.mark.parametrize("source", STAGES)
@pytest.mark.parametrize("target", STAGES)
def test_move_table(source, target):
    event = ticket_machine.move_event(source, target)
    if target in ALLOWED[source]:
        row = Row(source)
        assert ticket_machine.fire(row, event) == (source, target)
    else:
        assert event is None


@pytest.mark.parametrize("stage", LIVE_STAGES)
@pytest.mark.parametrize(("event", "target"), [("mark_done", "done"), ("cancel", "cancelled")])
def test_mark_done_and_cancel_from_every_live_stage(stage, event, target):
    row = Row(stage)
    assert ticket_machine.fire(row, event) == (stage, target)


@pytest.mark.parametrize("final", ["done", "cancelled"])
@pytest.mark.parametrize("event", ["mark_done", "cancel", "queue", "start", "block"])
def test_final_stages_are_final(final, event):
    with pytest.raises(TransitionForbidden) as caught:
        ticket_machine.fire(Row(final), event)
    assert caught.value.current == final


def test_the_writing_ticket_is_not_moved_by_the_board():
    row = Row("queued", key="WRITING-DAILY")
    with pytest.raises(TransitionForbidden, match="notify"):
        ticket_machine.fire(row, "start")
    assert row.stage == "queued"


def test_a_reused_machine_serves_the_next_row_after_one_reached_a_final_stage():
    # Machines are reused per thread; one that reached `done` has terminated and must be replaced.
    assert ticket_machine.fire(Row("execute", key="PORT-1"), "mark_done") == ("execute", "done")
    assert ticket_machine.fire(Row("queued", key="PORT-2"), "start") == ("queued", "execute")
    with pytest.raises(TransitionForbidden):
        ticket_machine.fire(Row("done", key="PORT-3"), "start")
    assert ticket_machine.fire(Row("blocked", key="PORT-4"), "queue") == ("blocked", "queued")
