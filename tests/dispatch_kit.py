"""Shared by the dispatch tests: a policy with live rules, worker accounts, a queued job, a worker's output."""

from __future__ import annotations

import copy
from typing import Any

from domain.policy.document import FIRST_RULES

from conftest import CI_SECRET, PASSWORDS
from events_kit import ALLOWLIST, seed_board
from router_kit import envelope, route
from testclient import ApiClient

WORKER_PASSWORD = "worker-password-1"


def policy(*, live: tuple[str, ...] = ("coder",), fleet_size: int = 1, retry_budget: int = 2) -> dict[str, Any]:
    rules = copy.deepcopy(list(FIRST_RULES))
    for rule in rules:
        if rule["name"] in live:
            rule["mode"] = "live"
    return {"allowlist": sorted(ALLOWLIST), "retry_budget": retry_budget, "fleet_size": fleet_size, "rules": rules}


def set_policy(api: ApiClient, document: dict[str, Any]) -> dict[str, Any]:
    """Adopt `document` (forced: the evidence is not what these tests are about)."""
    tag = api.get("/api/v1/router/policy").headers["ETag"]
    answer = api.put(
        "/api/v1/router/policy",
        json={"policy": document, "reason": "a dispatch test", "force": "the test says so"},
        headers={"If-Match": tag},
    )
    assert answer.status_code == 200, answer.text
    return answer.json


def worker(api: ApiClient, name: str = "bay-1", *, bay: str | None = None) -> ApiClient:
    """An API client signed in as a new worker account `name` (in bay `bay`, by default its name)."""
    from domain import accounts

    accounts.add(name, "worker", WORKER_PASSWORD, passwords=PASSWORDS, bay=bay)
    return ApiClient(api.client.app, basic=f"{name}:{WORKER_PASSWORD}", ci_secret=CI_SECRET)


def make_job(key: str, *, at=None) -> int:
    """A queued job for ticket `key` (on the board), with a decision of its own, made by the domain's own calls."""
    from datetime import UTC, datetime

    from domain import units
    from domain.board import Board
    from domain.config import Config
    from domain.dispatch.jobs import Dispatch
    from domain.router.gates import GATES
    from storage import decisions

    when = at or datetime(2026, 11, 20, 10, 0, tzinfo=UTC)

    def work() -> int:
        decision = decisions.record(
            event_id=f"made:{key}",
            evaluated_at=when,
            mode="live",
            source="svc",
            kind="state_changed",
            subject_id=key,
            outcome="would_dispatch",
            role="coder",
            gates=[{"gate": gate.name, "passed": True, "reason": "made by a test"} for gate in GATES],
            envelope=envelope("state_changed", key),
            errors=None,
            rule="coder",
            dispatched=False,
        )
        dispatch = Dispatch(Config(), lambda: when, Board(Config(), lambda: when))
        return dispatch.queue(
            decision_id=decision.id,
            event_id=f"made:{key}",
            ticket=key,
            role="coder",
            rule="coder",
            head_sha=None,
            at=when,
        ).job_id

    return units.run(work)


def board(api: ApiClient, *keys: str, stage: str = "queued") -> None:
    seed_board(api, tickets={key: stage for key in keys})


def queue_job(api: ApiClient, key: str = "PORT-7", **kwargs) -> dict[str, Any]:
    """Route a coder event about `key` (a live coder rule queues a job); the decision."""
    return route(api, envelope("state_changed", key, **kwargs))


def claim(client: ApiClient, bay: str = "bay-1"):
    return client.post("/api/v1/dispatch/claim", json={"bay": bay})


def output(job: dict[str, Any], status: str = "changes_ready", **changes: Any) -> dict[str, Any]:
    """A valid svc.worker-output/v0 document for `job` (as listed, or as a claim hands it over)."""
    key = job["ticket"]["key"] if isinstance(job["ticket"], dict) else job["ticket"]
    document: dict[str, Any] = {
        "schema": "svc.worker-output/v0",
        "ticket": key,
        "role": job["role"],
        "status": status,
        "summary": "Made the change the ticket asks for.",
    }
    if job.get("event_id"):
        document["event_id"] = job["event_id"]
    if status == "changes_ready":
        document.update(
            {
                "branch": f"svc/{key.lower()}/work",
                "commits": [{"sha": "a" * 40, "message": "Make the change"}],
                "files_changed": ["src/app.py"],
                "pull_request": {"title": f"{key}: the change", "body": "What it does and why."},
                "comment": "The change is ready for review.",
            }
        )
    document.update(changes)
    return {k: v for k, v in document.items() if v is not None}
