"""The board's stage vocabulary and the Needs-you rule, shared by every ticket machine."""

from __future__ import annotations

from enum import StrEnum

from machines.job import ACTIVE as JOB_ON_IT


class Stage(StrEnum):
    """Every stage of the board, in board order: the one declaration both ticket machines build their states from
    (`States.from_enum`), and `STAGES` lists."""

    agreement = "agreement"
    queued = "queued"
    execute = "execute"
    ci = "ci"
    human_test = "human_test"
    human_merge = "human_merge"
    ship = "ship"
    done = "done"
    blocked = "blocked"
    cancelled = "cancelled"


STAGES: tuple[str, ...] = tuple(stage.value for stage in Stage)
FINAL_STAGES = frozenset({"done", "cancelled"})
# A ticket in one of these is not worked on: a worker on it is told to stop, and its jobs are cancelled.
STOP_STAGES = FINAL_STAGES | {"blocked"}
LIVE_STAGES: tuple[str, ...] = tuple(s for s in STAGES if s not in FINAL_STAGES)

WAITING_ON: tuple[str, ...] = ("agent", "topic_refill", "agent_failed", "ci", "forge_failed")

HUMAN_GATE_STAGES = frozenset({"human_test", "human_merge"})
NEEDS_YOU_WAITING_ON = frozenset({"agent", "topic_refill", "agent_failed", "forge_failed"})

WRITING_TICKET_KEY = "WRITING-DAILY"


def needs_you(stage: str, waiting_on: str | None, job_state: str | None = None) -> bool:
    """A human must act: the ticket sits at a human gate or is blocked, or waits on someone to run, refill or fix
    something; unless a dispatch job is queued or running for it (`job_state`, one of the job machine's `ACTIVE`
    states): then a worker is on it.

    The writing ticket is additionally hidden while writing automation is off; that depends on a setting,
    not on the ticket, so the board applies it when it lists.
    """
    if job_state in JOB_ON_IT:
        return False
    return stage == "blocked" or at_a_gate(stage, waiting_on)


def at_a_gate(stage: str, waiting_on: str | None) -> bool:
    """The ticket waits at a gate a person raised or must pass: a human gate, or a wait on someone to run, refill
    or fix something (what the board's `needs_you` and `cleared` events are about)."""
    return stage in HUMAN_GATE_STAGES or waiting_on in NEEDS_YOU_WAITING_ON
