"""The domain's services as both entry points build them (`build_services`): the board with its listeners wired, the
router, live dispatch, the forge writes, the writing agent and the ops agents, from the configuration, the clock and
the outside clients the entry point hands in.

The HTTP app (`api/app.py`) and the jobs process (`jobs/assembly.py`) each call it once, so the board a unit of work
moves a ticket on hears the same listeners whichever process runs it: the router's queue (`queue_for_router`), live
dispatch (a ticket finished or blocked cancels its jobs) and the scorecard (a slot claim takes up its decisions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from domain.board import Board, StageListener
from domain.clock import Clock
from domain.config import Config
from domain.dispatch.forge import ForgeWrites, forge_adapters
from domain.dispatch.jobs import Dispatch
from domain.ops.agents import OpsAgents
from domain.ops.steward import Wiper
from domain.outage import DatabaseOutage
from domain.router import scorecard
from domain.router.board_events import queue_for_router
from domain.router.routing import Router
from domain.writing import WritingAgent
from integrations.forges import Forge


@dataclass(frozen=True)
class DomainServices:
    """What both entry points call, built once per process: one board, and everything that moves tickets on it."""

    config: Config
    clock: Clock
    board: Board
    router: Router
    dispatch: Dispatch
    forge_writes: ForgeWrites
    writing: WritingAgent
    ops: OpsAgents
    # The forge adapters, one a forge the service has a token for: who the service is on each, and what it writes.
    forges: Mapping[str, Forge]
    # What this process knows of a database outage: /healthz and the board read it, the jobs' workers feed it.
    outage: DatabaseOutage


def build_services(
    config: Config,
    clock: Clock,
    *,
    forges: Mapping[str, Forge] | None = None,
    stage_listeners: tuple[StageListener, ...] = (),
    outage: DatabaseOutage | None = None,
    wiper: Wiper | None = None,
) -> DomainServices:
    """The services on one board. `forges` are the forge adapters (from the configuration's tokens when not given);
    `stage_listeners` hear every stage change after the router and live dispatch (a test's); `outage` is the
    process's view of a database outage (a fresh one by default); `wiper` wipes the ops agents' bays (the configured
    command's when not given)."""
    forges = forge_adapters(config) if forges is None else forges
    outage = outage or DatabaseOutage()
    # The router hears every stage change (queued through the outbox, so a change stays one insert dearer), and its
    # scorecard every slot claim; live dispatch hears a ticket finished or blocked (its jobs are cancelled).
    board = Board(config, clock, stage_listeners=(queue_for_router,), claim_listeners=(scorecard.slot_claimed,))
    router = Router(config, clock, board=board, forges=dict(forges))
    board.stage_listeners.extend((router.dispatch.ticket_moved, *stage_listeners))
    return DomainServices(
        config=config,
        clock=clock,
        board=board,
        router=router,
        dispatch=router.dispatch,
        forge_writes=ForgeWrites(config, clock, board),
        writing=WritingAgent(config, clock, board),
        ops=OpsAgents(config, clock, board=board, wiper=wiper, outage=outage),
        forges=forges,
        outage=outage,
    )
