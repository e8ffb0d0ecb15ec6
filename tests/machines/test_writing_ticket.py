"""The writing ticket's machine and the table derived from it for the hot path: the two never disagree."""

import pytest

from machines import writing_ticket as writing
from machines.errors import TransitionForbidden
from machines.stages import STAGES, WAITING_ON
from machines.writing_ticket import NOTIFY_MOVES, WritingTicket


class Model:
    def __init__(self, stage, waiting_on):
        self.stage, self.waiting_on = stage, waiting_on


@pytest.mark.parametrize("stage", STAGES)
def test_the_derived_table_says_what_the_machine_does_from_every_stage_and_waiting_on(stage):
    table = writing.transitions()
    for waiting_on in (None, *WAITING_ON):
        for event in WritingTicket.events:
            model = Model(stage, waiting_on)
            try:
                WritingTicket(model).send(event.id)
            except WritingTicket.TransitionNotAllowed:
                assert (stage, event.id) not in table
                continue
            assert table[(stage, event.id)] == writing.Moved(model.stage, model.waiting_on), (stage, event.id)


def test_the_table_covers_every_stage_and_every_report_as_the_seed_says():
    table = writing.transitions()
    events = {move.event for move in NOTIFY_MOVES.values() if move.event}
    assert set(table) == {(stage, event) for stage in STAGES for event in events}  # the prior stage never restricts
    for status, move in NOTIFY_MOVES.items():
        if move.event is None:
            continue
        ticket = Model("cancelled", "ci")
        writing.apply_report(ticket, writing.notify_move("FAIL_QA" if status == "FAIL_*" else status))
        assert (ticket.stage, ticket.waiting_on) == (move.stage, move.waiting_on)


def test_automation_disabled_moves_nothing_and_an_unknown_stage_is_refused():
    ticket = Model("ship", "ci")
    assert writing.apply_report(ticket, writing.notify_move("AUTOMATION_DISABLED")) == ("ship", "ship")
    assert (ticket.stage, ticket.waiting_on) == ("ship", "ci")
    with pytest.raises(TransitionForbidden):
        writing.apply_report(Model("limbo", None), writing.notify_move("SUCCESS"))
