"""Filling a benchmark database fast: rows written straight into the tables (executemany), shaped like a real
board — tickets in every stage, a share of them needing someone, decisions of every outcome, agent runs."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from peewee import fn

from machines.stages import STAGES, needs_you
from storage import db as storage_db
from storage import migrations
from storage import tickets as storage_tickets
from storage.models import AgentRun, Initiative, RouterDecision, ScorecardEntry, Ticket

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


# The policy the seeded decisions were taken under (and the backtest benchmark's baseline).
ALLOWLIST = ("gitlab:gitlab-ci", "linear:ada", "svc:ada")
ACTORS = (*ALLOWLIST, "github:bob")
BOARD_STAGES = ("queued", "execute", "ci", "human_test", "blocked")


def decisions(count: int, ticket_count: int, *, seed: int = 11) -> None:
    """`count` decisions a second apart up to NOW, each evaluated by the router's own gates against facts drawn
    for it (so they are what the live router would have recorded, and a backtest under their policy flips none),
    with the scorecard entries the live router keeps: red pipelines for the fixer, moves to execute for the coder,
    a sixth of them broken envelopes, and about half of the judged ones taken up within hours."""
    from collections import deque

    from domain.policy.document import Policy
    from domain.router.board_view import RETRY_WINDOW, Facts, RecordedBoardView
    from domain.router.evaluation import WOULD_DISPATCH, evaluate

    rng = random.Random(seed)
    policy = Policy(frozenset(ALLOWLIST))
    recorded_policy = policy.as_dict()
    dispatched: dict[str, deque] = {}
    rows, entries = [], []
    for n in range(count):
        at = NOW - timedelta(seconds=count - n)
        key = f"PORT-{rng.randrange(1, ticket_count + 1)}"
        roll = rng.random()
        if roll < 1 / 6:
            broken = {"schema": "svc.normalized-event/v0", "id": f"bench:{n}", "source": "ci"}
            rows.append(
                (
                    f"bench:{n}",
                    at,
                    "shadow",
                    "ci",
                    None,
                    None,
                    "rejected",
                    None,
                    [],
                    broken,
                    None,
                    None,
                    None,
                    None,
                    False,
                )
            )
            continue
        fixer = roll < 2 / 3
        envelope = {
            "schema": "svc.normalized-event/v0",
            "id": f"bench:{n}",
            "occurred_at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source": "ci" if fixer else "tracker",
            "transition": {"kind": "pipeline_failed"}
            if fixer
            else {"kind": "state_changed", "from": "queued", "to": "execute"},
            "subject": {"type": "ticket", "id": key},
            "actor": {
                "kind": "system" if fixer else "human",
                "id": "gitlab:gitlab-ci" if fixer else rng.choice(ACTORS),
                "roles": [],
            },
            "dispatch_hints": {"eligible_for_worker": True, "blocked_reason": None, "suggested_role": None},
        }
        if fixer:
            envelope["forge"] = {"pr_number": 7, "branch": key.lower(), "pipeline_id": n, "pipeline_status": "failure"}
        times = dispatched.setdefault(key, deque())
        while times and times[0] < at - RETRY_WINDOW:
            times.popleft()
        facts = Facts(
            ticket_stage=rng.choice(BOARD_STAGES),
            ticket_initiative_id="bench",
            initiative_stage="active" if rng.random() < 0.95 else "agree",
            wallet_locked=rng.random() < 0.02,
            slots_held_by_others=rng.choice((0, 0, 0, 1, 2)),
            fixer_dispatches=len(times) if fixer else None,
        )
        result = evaluate(envelope, RecordedBoardView(facts, key), policy, now=at)
        if result.outcome == WOULD_DISPATCH and result.role == "fixer":
            times.append(at)
        rows.append(
            (
                f"bench:{n}",
                at,
                "shadow",
                envelope["source"],
                envelope["transition"]["kind"],
                key,
                result.outcome,
                result.role,
                result.gates,
                envelope,
                None,
                recorded_policy,
                facts.as_dict(),
                result.rule_name,
                False,
            )
        )
        if result.role and result.outcome in ("would_dispatch", "blocked"):
            taken = at + timedelta(minutes=rng.randrange(5, 600)) if rng.random() < 0.5 else None
            failed = ",".join(g["gate"] for g in result.gates if not g["passed"])
            rule = result.rule
            entries.append((len(rows), key, result.role, result.outcome, failed, at, taken, rule.name, rule.version))
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
        "policy",
        "facts",
        "rule",
        "dispatched",
    ]
    with storage_db.connection():
        first_id = (RouterDecision.select(fn.MAX(RouterDecision.id)).scalar() or 0) + 1
    _executemany(RouterDecision, columns, rows)
    # Ids follow the insertion order from the first free one: the n-th row inserted has id first_id + n - 1.
    _executemany(
        ScorecardEntry,
        [
            "decision",
            "subject_id",
            "role",
            "outcome",
            "failed_gates",
            "evaluated_at",
            "taken_up_at",
            "rule",
            "rule_version",
        ],
        [(first_id + index - 1, *rest) for index, *rest in entries],
    )
    scorecard_days()


def scorecard_days() -> None:
    """Count the scorecard's settled days as the jobs process does once a minute (`svc serve` alone never does:
    a read only reads)."""
    from domain.router.scorecard import keep_settled_days

    with storage_db.connection():
        while keep_settled_days(now=datetime.now(UTC)):
            pass


def runs(per_agent: int = 200) -> None:
    from domain.ops.schedules import AGENTS

    rows = []
    for agent_id in AGENTS:
        for n in range(per_agent):
            at = NOW - timedelta(hours=per_agent - n)
            rows.append((agent_id, "OK", True, at, at + timedelta(seconds=2), "fine", None))
    _executemany(AgentRun, ["agent_id", "status", "ok", "started_at", "finished_at", "summary", "details"], rows)
