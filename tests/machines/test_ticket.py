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


def landings(stage: str, key: str = "PORT-1") -> dict[str, str]:
    """Every event the machine declares, fired on a ticket in `stage`: where each one that is allowed lands."""
    landed = {}
    for event in ticket_machine.TicketMachine.events:
        row = Row(stage, key=key)
        try:
            ticket_machine.fire(row, event.id)
        except TransitionForbidden:
            continue
        landed[event.id] = row.stage
    return landed


@pytest.mark.parametrize("stage", STAGES)
def test_the_board_menu_offers_every_move_the_machine_allows_and_no_other(stage):
    menu = ticket_machine.menu("PORT-1", stage)
    landed = landings(stage)
    moves = {
        target for event, target in landed.items() if event not in {"mark_done", "cancel", *ticket_machine.FORGE_EVENTS}
    }
    assert set(menu.moves) == moves
    assert len(menu.moves) == len(set(menu.moves))
    assert (menu.mark_done, menu.cancel) == ("mark_done" in landed, "cancel" in landed)
    for target in menu.moves:  # and each offered move is one `POST .../move {"to": target}` carries out
        row = Row(stage)
        assert ticket_machine.fire(row, ticket_machine.move_event(stage, target)) == (stage, target)


@pytest.mark.parametrize("stage", STAGES)
def test_the_writing_ticket_gets_no_menu_since_the_machine_refuses_it_everything(stage):
    assert landings(stage, key="WRITING-DAILY") == {}
    assert ticket_machine.menu("WRITING-DAILY", stage).empty


# The moves a ticket's pull request makes (CONTRACT.md, "The loop"): never a person's `move`.
FORGE_MOVES = {
    "new_push": {"execute", "human_test", "human_merge"},
    "merged": {"execute", "ci", "human_test", "human_merge"},
}


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("event", sorted(FORGE_MOVES))
def test_the_forge_moves_go_from_the_stages_the_loop_names(stage, event):
    target = {"new_push": "ci", "merged": "ship"}[event]
    if stage in FORGE_MOVES[event]:
        assert ticket_machine.fire(Row(stage), event) == (stage, target)
        assert ticket_machine.allows(stage, event)
        assert target not in ticket_machine.allowed_moves(stage) or ticket_machine.move_event(stage, target) != event
    else:
        with pytest.raises(TransitionForbidden):
            ticket_machine.fire(Row(stage), event)
        assert not ticket_machine.allows(stage, event)


def test_a_person_cannot_move_a_ticket_out_of_a_human_gate_to_ci():
    assert "ci" not in ticket_machine.allowed_moves("human_test")
    assert "ci" not in ticket_machine.allowed_moves("human_merge")
