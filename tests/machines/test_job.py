"""A dispatch job's lifecycle (`machines/job.py`) and a forge write's (`machines/forge_write.py`), event by event; and
what the service derives from them held to the machines."""

from __future__ import annotations

import pytest

from machines import forge_write, job, stages
from machines.errors import TransitionForbidden

JOB_MOVES = {
    ("queued", "hold"): "held",
    ("held", "release"): "queued",
    ("queued", "claim"): "running",
    ("running", "put_back"): "queued",
    ("running", "succeed"): "succeeded",
    ("running", "fail"): "failed",
    ("held", "cancel"): "cancelled",
    ("queued", "cancel"): "cancelled",
    ("running", "cancel"): "cancelled",
}
FORGE_MOVES = {
    ("none", "queue"): "pending",
    ("none", "hold"): "held",
    ("pending", "hold"): "held",
    ("held", "release"): "pending",
    ("pending", "write"): "written",
    ("pending", "fail"): "failed",
    ("failed", "retry"): "pending",
    ("held", "drop"): "dropped",
    ("pending", "drop"): "dropped",
    ("failed", "drop"): "dropped",
}


@pytest.mark.parametrize("state", job.STATES)
@pytest.mark.parametrize("event", sorted({event for _, event in JOB_MOVES}))
def test_every_job_move_is_the_table_s_and_no_other(state, event):
    expected = JOB_MOVES.get((state, event))
    if expected is None:
        with pytest.raises(TransitionForbidden) as caught:
            job.fire(state, event)
        assert caught.value.current == state
        assert not job.allows(state, event)
    else:
        assert job.fire(state, event) == expected


def test_the_derived_table_is_the_machine_s():
    assert job.transitions() == JOB_MOVES
    assert job.STATES == ("queued", "held", "running", "succeeded", "failed", "cancelled")
    assert {"succeeded", "failed", "cancelled"} == job.FINAL
    assert {state for state, event in JOB_MOVES if event == "cancel"} == job.CANCELLABLE
    assert job.RETRYABLE <= job.FINAL and "succeeded" not in job.RETRYABLE
    # A final state has no way out: a job that ended runs again only as a new job.
    assert not [key for key in job.transitions() if key[0] in job.FINAL]


def test_a_new_job_is_queued_or_held_while_paused():
    assert job.first_state(paused=False) == "queued"
    assert job.first_state(paused=True) == "held"


def test_the_states_that_take_a_ticket_off_needs_you_are_the_active_ones():
    assert stages.JOB_ON_IT == job.ACTIVE == {"queued", "running"}
    assert not stages.needs_you("execute", "agent_failed", "queued")
    assert stages.needs_you("execute", "agent_failed", "held")
    assert stages.needs_you("blocked", None) and stages.needs_you("execute", "forge_failed")


@pytest.mark.parametrize("state", forge_write.STATES)
@pytest.mark.parametrize("event", sorted({event for _, event in FORGE_MOVES}))
def test_every_forge_write_move_is_the_table_s_and_no_other(state, event):
    expected = FORGE_MOVES.get((state, event))
    if expected is None:
        with pytest.raises(TransitionForbidden):
            forge_write.fire(state, event)
    else:
        assert forge_write.fire(state, event) == expected


def test_the_forge_write_table_is_the_machine_s():
    assert forge_write.transitions() == FORGE_MOVES
    assert {"written", "dropped"} == forge_write.FINAL
    assert forge_write.first_state(paused=False) == "pending"
    assert forge_write.first_state(paused=True) == "held"
