"""Envelopes made to order for the router's evidence tests (backtest, scorecard): one kind, one ticket, one actor."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

from domain.clock import iso

_ids = itertools.count(1)

SOURCE_OF = {
    "state_changed": "tracker",
    "opened": "forge",
    "synchronized": "forge",
    "pipeline_started": "ci",
    "pipeline_failed": "ci",
    "pipeline_passed": "ci",
    "needs_you": "svc",
}


def envelope(
    kind: str,
    key: str,
    *,
    actor: str = "linear:6d3a8c8e-3b1f-4b9e-a2c4-9f7d1e2b3c4d",
    to: str | None = None,
    initiative: str | None = "portfolio",
    event_id: str | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    """A valid svc.normalized-event/v0 envelope. `state_changed` to `execute` matches the coder rule and
    `pipeline_failed` the fixer rule. It happened at `at` (a test's clock, so that it is fresh when judged), else at
    the test clock's start."""
    transition: dict[str, Any] = {"kind": kind}
    if kind == "state_changed":
        transition.update({"from": "queued", "to": to or "execute"})
    elif kind == "needs_you":
        transition.update({"from": "execute", "to": to or "human_test"})
    subject: dict[str, Any] = {"type": "ticket", "id": key}
    if initiative:
        subject["initiative_id"] = initiative
    document = {
        "schema": "svc.normalized-event/v0",
        "id": event_id or f"test:{next(_ids)}",
        "occurred_at": iso(at) if at is not None else "2026-11-20T10:00:00Z",
        "source": SOURCE_OF.get(kind, "svc"),
        "transition": transition,
        "subject": subject,
        "actor": {"kind": "human" if kind == "state_changed" else "system", "id": actor, "roles": []},
        "dispatch_hints": {
            "eligible_for_worker": kind in ("state_changed", "pipeline_failed"),
            "blocked_reason": None,
            "suggested_role": None,
        },
    }
    if SOURCE_OF.get(kind) in ("forge", "ci"):
        document["forge"] = {"pr_number": 7, "branch": f"{key.lower()}-work"}
        if kind.startswith("pipeline_"):
            status = {"pipeline_started": "running", "pipeline_failed": "failure", "pipeline_passed": "success"}[kind]
            document["forge"].update({"pipeline_id": 8201, "pipeline_status": status})
    return document


STRANGER = "github:bob"  # on no allowlist: every event of theirs fails the authorization gate


def allowlisted(app_factory, config_factory):
    """An API client on an app whose router lets the example actors (`events_kit.ALLOWLIST`) through."""
    from conftest import BASIC, CI_SECRET
    from events_kit import ALLOWLIST
    from testclient import ApiClient

    return ApiClient(app_factory(config_factory(router_allowlist=ALLOWLIST)), basic=BASIC, ci_secret=CI_SECRET)


def route(api, document: dict[str, Any]) -> dict[str, Any]:
    """POST one envelope; the decision recorded for it (202)."""
    answer = api.post("/api/v1/events", json=document, auth="ci")
    assert answer.status_code == 202, answer.text
    return answer.json["decision"]
