"""The ops endpoints: run the pulse, the weekly digest, the slot steward or idle reclaim now; the snapshot.

Each responder makes one call to the ops agents and represents what came back. A chat post is queued in
the outbox ("posted"), never sent from here; the agents' own outbound work (the staging check, bay wipes)
happens inside the agent run the responder asked for.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import falcon

from api import media, representations
from api.operations import Operation
from api.resources.agents_strip import agent_row
from domain.clock import Clock, iso
from domain.ops.agents import OpsAgents, Snapshot
from domain.ops.pulse import staging_record
from domain.ops.runs import Trigger
from domain.ops.steward import BayReport, SlotOutcome

_ERRORS = {401: "problem.json", 422: "problem.json"}


def _trigger(req: falcon.Request) -> Trigger:
    return Trigger("api", actor=req.context.identity.actor)


def _slots(outcomes: list[SlotOutcome]) -> list[dict[str, Any]]:
    return [{"slot": o.slot, "ticket": o.ticket} for o in outcomes]


class Pulse:
    operations = {
        "POST": Operation(
            "Run the daily pulse now, then the slot steward; post to chat per post_to_chat",
            request="ops-pulse-request.json",
            request_optional=True,
            responses={200: "ops-pulse.json", **_ERRORS},
            tags=("ops",),
        ),
    }

    def __init__(self, ops: OpsAgents):
        self.ops = ops

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        report = self.ops.pulse(_trigger(req), post_to_chat=req.context.body.get("post_to_chat"))
        resp.media = {
            "issues": [i.as_dict() for i in report.issues],
            "posted": report.posted,
            "steward": {"released": _slots(report.steward.released)},
            "run": representations.run(report.run),
        }


class WeeklyDigest:
    operations = {
        "POST": Operation(
            "Send the weekly digest now (queued for chat)",
            request="ops-empty-request.json",
            request_optional=True,
            responses={200: "ops-digest.json", **_ERRORS},
            tags=("ops",),
        ),
    }

    def __init__(self, ops: OpsAgents):
        self.ops = ops

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        report = self.ops.weekly_digest(_trigger(req))
        resp.media = {"message": report.message, "posted": report.posted, "run": representations.run(report.run)}


class SlotSteward:
    operations = {
        "POST": Operation(
            "Release the slots of done and cancelled tickets now (wipe the bay, drop the claim)",
            request="ops-empty-request.json",
            request_optional=True,
            responses={200: "ops-steward.json", **_ERRORS},
            tags=("ops",),
        ),
    }

    def __init__(self, ops: OpsAgents):
        self.ops = ops

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        report: BayReport = self.ops.slot_steward(_trigger(req))
        resp.media = {"released": _slots(report.released), "run": representations.run(report.run)}


class IdleReclaim:
    operations = {
        "POST": Operation(
            "Wipe bays idle for more than 24 hours now (what `svc jobs` runs at 04:00 UTC; for external crons)",
            request="ops-empty-request.json",
            request_optional=True,
            responses={200: "ops-idle-reclaim.json", **_ERRORS},
            tags=("ops",),
        ),
    }

    def __init__(self, ops: OpsAgents):
        self.ops = ops

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        report = self.ops.idle_reclaim(_trigger(req))
        wiped = report.of("wiped", "released")
        resp.media = {"wiped": _slots(wiped), "run": representations.run(report.run)}


class OpsSnapshot:
    operations = {
        "GET": Operation(
            "Board counts, Needs-you, health, agents, automation, slots, wallet and the last staging check at once",
            responses={200: "ops-snapshot.json", 401: "problem.json"},
            tags=("ops",),
        ),
    }

    def __init__(self, ops: OpsAgents, clock: Clock, max_age: float):
        self.ops = ops
        self.clock = clock
        self.max_age = max_age
        self._rendered: tuple[datetime, bytes] | None = None
        self._lock = threading.Lock()

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        # Tools poll the snapshot; each API process renders it at most once per SVC_SNAPSHOT_MAX_AGE seconds
        # (its generated_at says how old it is). One thread renders while the others wait for its result.
        with self._lock:
            now = self.clock()
            rendered = self._rendered
            age = (now - rendered[0]).total_seconds() if rendered is not None else None
            if age is None or not 0 <= age < self.max_age:  # a clock stepped back also renders anew
                rendered = (now, media.dumps(snapshot(self.ops.snapshot())))
                self._rendered = rendered if self.max_age > 0 else None
        resp.content_type = falcon.MEDIA_JSON
        resp.data = rendered[1]
        resp.cache_control = [f"private, max-age={int(self.max_age)}"]


def snapshot(s: Snapshot) -> dict[str, Any]:
    failing = any(not check["ok"] for check in s.health.values())
    last = s.staging_last_check
    return {
        "generated_at": iso(s.generated_at),
        "health": {"status": "failing" if failing else "ok", "checks": s.health},
        "counts": {"by_stage": s.by_stage, "needs_you": s.needs_you_count, "stuck": s.stuck, "blocked": s.blocked},
        "needs_you": [representations.ticket(t) for t in s.needs_you],
        "agents": [agent_row(a) for a in s.agents],
        "automation": {
            "enabled": s.automation.enabled,
            "updated_at": iso(s.automation.updated_at),
            "updated_by": s.automation.updated_by,
        },
        "slots": [representations.slot(v) for v in s.slots],
        "wallet": representations.wallet(s.wallet),
        "staging": {
            "configured": s.staging_configured,
            "url": s.staging_url,
            "last_check": staging_record(last) if last is not None else None,
        },
    }


def routes(services) -> list[tuple[str, object]]:
    ops = services.ops
    return [
        ("/api/v1/ops/pulse", Pulse(ops)),
        ("/api/v1/ops/weekly-digest", WeeklyDigest(ops)),
        ("/api/v1/ops/slot-steward", SlotSteward(ops)),
        ("/api/v1/ops/idle-reclaim", IdleReclaim(ops)),
        ("/api/v1/ops/snapshot", OpsSnapshot(ops, services.clock, services.config.snapshot_max_age)),
    ]
