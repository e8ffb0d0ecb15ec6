"""The board's stage vocabulary and the Needs-you rule, shared by every ticket machine."""

from __future__ import annotations

from enum import StrEnum


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
LIVE_STAGES: tuple[str, ...] = tuple(s for s in STAGES if s not in FINAL_STAGES)

WAITING_ON: tuple[str, ...] = ("agent", "topic_refill", "agent_failed", "ci")

HUMAN_GATE_STAGES = frozenset({"human_test", "human_merge"})
NEEDS_YOU_WAITING_ON = frozenset({"agent", "topic_refill", "agent_failed"})

WRITING_TICKET_KEY = "WRITING-DAILY"


def needs_you(stage: str, waiting_on: str | None) -> bool:
    """A human must act: the ticket sits at a human gate, or waits on someone to run, refill or fix something.

    The writing ticket is additionally hidden while writing automation is off; that depends on a setting,
    not on the ticket, so the board applies it when it lists.
    """
    return stage in HUMAN_GATE_STAGES or waiting_on in NEEDS_YOU_WAITING_ON
