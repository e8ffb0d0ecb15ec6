"""Filling a benchmark database fast: rows written straight into the tables (executemany), shaped like a real
board — tickets in every stage, a share of them needing someone, decisions of every outcome, agent runs."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from machines.stages import STAGES, needs_you
from storage import db as storage_db
from storage import migrations
from storage import tickets as storage_tickets
from storage.models import AgentRun, Initiative, RouterDecision, Ticket

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
# Most of a real board is finished work; a few percent sit at a human gate.
STAGE_WEIGHTS = {
    "agreement": 3,
    "queued": 8,
    "execute": 5,
    "ci": 3,
    "human_test": 1,
    "human_merge": 1,
    "ship": 1,
    "done": 70,
    "blocked": 2,
    "cancelled": 6,
}
WAITING = [None, None, None, None, "agent", "ci", "topic_refill", "agent_failed"]
OUTCOMES = ["blocked", "blocked", "blocked", "would_dispatch", "no_action", "rejected"]


def open_db(url: str) -> None:
    storage_db.bind(storage_db.open_database(url))
    migrations.migrate()


def _executemany(model, columns: list[str], rows: list[tuple], batch: int = 5000) -> None:
    fields = [model._meta.fields[c] for c in columns]
    names = ", ".join(f'"{f.column_name}"' for f in fields)
    param = storage_db.db.obj.param
    sql = f'INSERT INTO "{model._meta.table_name}" ({names}) VALUES ({", ".join(param for _ in fields)})'
    with storage_db.connection():
        for start in range(0, len(rows), batch):
            chunk = [
                tuple(f.db_value(v) for f, v in zip(fields, row, strict=True)) for row in rows[start : start + batch]
            ]
            with storage_db.db.atomic():
                storage_db.db.cursor().executemany(sql, chunk)


def tickets(count: int, *, seed: int = 7) -> None:
    rng = random.Random(seed)
    with storage_db.connection():
        Initiative.insert(
            id="bench", name="Benchmark", stage="active", created_at=NOW, updated_at=NOW
        ).on_conflict_ignore().execute()
    stages = rng.choices(list(STAGE_WEIGHTS), weights=list(STAGE_WEIGHTS.values()), k=count)
    rows = []
    for n, stage in enumerate(stages, start=1):
        waiting = rng.choice(WAITING) if stage in {"queued", "execute", "blocked"} else None
        changed = NOW - timedelta(minutes=rng.randrange(0, 60 * 24 * 60))
        rows.append(
            (
                f"PORT-{n}",
                "bench",
                f"Port page {n} to the new stack",
                stage,
                waiting,
                None,
                None,
                None,
                needs_you(stage, waiting),
                1,
                changed,
                changed - timedelta(days=1),
                changed,
            )
        )
    columns = [
        "key",
        "initiative",
        "title",
        "stage",
        "waiting_on",
        "tracker_issue_id",
        "assigned_slot",
        "link",
        "needs_you",
        "version",
        "stage_changed_at",
        "created_at",
        "updated_at",
    ]
    _executemany(Ticket, columns, rows)
    assert set(stages) <= set(STAGES)
    with storage_db.connection(), storage_db.db.atomic():
        storage_tickets.recount()  # written behind the service's back, so count them as a migration would


def decisions(count: int, ticket_count: int, *, seed: int = 11) -> None:
    rng = random.Random(seed)
    gates = json.loads(
        json.dumps(
            [
                {"gate": g, "passed": True, "reason": "ok"}
                for g in ["authorization", "agreement", "budget", "fleet", "human_gate", "retry_budget"]
            ]
        )
    )
    rows = []
    for n in range(count):
        outcome = rng.choice(OUTCOMES)
        rows.append(
            (
                f"bench:{n}",
                NOW - timedelta(seconds=count - n),
                "shadow",
                "ci",
                "pipeline_failed",
                f"PORT-{rng.randrange(1, ticket_count + 1)}",
                outcome,
                "fixer" if outcome != "rejected" else None,
                gates if outcome != "rejected" else [],
                None,
                None,
            )
        )
    columns = [
        "event_id",
        "evaluated_at",
        "mode",
        "source",
        "kind",
        "subject_id",
        "outcome",
        "role",
        "gates",
        "envelope",
        "errors",
    ]
    _executemany(RouterDecision, columns, rows)


def runs(per_agent: int = 200) -> None:
    from domain.ops.schedules import AGENTS

    rows = []
    for agent_id in AGENTS:
        for n in range(per_agent):
            at = NOW - timedelta(hours=per_agent - n)
            rows.append((agent_id, "OK", True, at, at + timedelta(seconds=2), "fine", None))
    _executemany(AgentRun, ["agent_id", "status", "ok", "started_at", "finished_at", "summary", "details"], rows)
