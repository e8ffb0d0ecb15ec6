"""The agents strip over HTTP (`domain/ops/agents_strip.py` is the domain side): GET /api/v1/agents, and run history."""

from __future__ import annotations

import falcon

from api import params, representations
from api.operations import CI_OR_BASIC, CURSOR, LIMIT, Operation, Param
from domain.clock import iso
from domain.ops import agents_strip, runs
from domain.ops.schedules import AGENT_IDS


def agent_row(status: agents_strip.AgentStatus) -> dict:
    last = status.last_run
    return {
        "agent_id": status.schedule.agent_id,
        "description": status.schedule.description,
        "last_status": last.status if last else None,
        "last_run_at": iso(last.started_at) if last else None,
        "ok": bool(last.ok) if last else None,
        "schedule": status.schedule.schedule_text,
        "schedule_in_words": status.schedule.schedule_in_words,
        "next_due_at": iso(status.next_due_at),
        "late": status.late,
    }


class Agents:
    operations = {
        "GET": Operation(
            "The agents strip: last status, last run, schedule, next due time, late",
            responses={200: "agents.json"},
            tags=("agents",),
        ),
    }

    def __init__(self, clock):
        self.clock = clock

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"agents": [agent_row(s) for s in agents_strip.strip(self.clock())]}


class AgentRuns:
    operations = {
        "GET": Operation(
            "Run history, newest first, optionally of one agent",
            auth=CI_OR_BASIC,
            responses={200: "agent-run-list.json", 400: "problem.json"},
            params=(
                Param("agent_id", {"type": "string", "enum": list(AGENT_IDS)}, "Only this agent's runs."),
                LIMIT,
                CURSOR,
            ),
            tags=("agents",),
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        rows, after = runs.history(
            params.choice(req, "agent_id", AGENT_IDS), limit=params.limit(req), cursor=params.cursor(req)
        )
        resp.media = representations.page("runs", [representations.run(r) for r in rows], after)


def routes(services) -> list[tuple[str, object]]:
    return [("/api/v1/agents", Agents(services.clock)), ("/api/v1/agents/runs", AgentRuns())]
