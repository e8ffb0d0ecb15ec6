"""A year of history, flat: the reads a person makes every day, timed on a year of 2,000 decisions and on the same
year with a hundred times more (200,000), side by side, on SQLite and on PostgreSQL.

Each size gets a database of its own: migrated, a board of 30 tickets, then a year of `svc.normalized-event/v0`
envelopes (tracker moves, forge pushes and pull requests, pipelines, the board's own events; about 30 tickets, a
few actors, some of them on no allowlist) recorded by `svc import`, and the scorecard's settled days counted once,
as the jobs process does every minute. Then `svc serve` on each (the snapshot computed on every request), and each
read asked of both sizes in turn, round after round, so the machine's noise falls on both alike: the median of
each, and the ratio of the larger to the smaller. The contract's target is 1.5 at most.

What the requests did is checked: every envelope of the file is a decision (counted), the scorecard has entries
to judge, the API's first page and the web page each show 50 decisions, the scorecard judged them.

    python bench/history.py [--sizes 2000,200000] [--backends sqlite,postgresql] [--rounds 40]
                            [--postgres postgresql://127.0.0.1:5432/test]

`make bench BENCH_ARGS=history` runs it too (`bench/run.py`). PostgreSQL databases are made beside the one
`--postgres` names (`bench_history_2000`, ...), dropped first if they are there.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import seed

HERE = Path(__file__).resolve().parent
BASIC = {"Authorization": "Basic " + base64.b64encode(":".join(harness.BASIC).encode()).decode()}
SIZES = (2_000, 200_000)
DAYS = 365
TICKETS = 30
TARGET = 1.5
PAGE = 50
POSTGRES = "postgresql://127.0.0.1:5432/test"

# Who acts: the tracker's people (one of them on no allowlist), the forges' bots and people, the CI systems.
PEOPLE = ("linear:ada", "linear:grace", "linear:linus")
ALLOWLIST = ("linear:ada", "linear:grace", "gitlab:gitlab-ci", "github:github-actions", "svc:ada")
# (weight, kind): what a year of a team's tickets sends, roughly.
KINDS = (
    (22, "state_changed"),
    (6, "opened"),
    (14, "synchronized"),
    (14, "pipeline_started"),
    (16, "pipeline_failed"),
    (14, "pipeline_passed"),
    (3, "merged"),
    (1, "closed"),
    (4, "needs_you"),
    (6, "dispatch_requested"),
)
MOVES = (("queued", "execute"), ("queued", "execute"), ("agreement", "queued"), ("execute", "ci"), ("ci", "done"))


def envelopes(count: int, *, end: datetime, tag: str, seed_: int = 2026) -> list[dict]:
    """`count` envelopes over the `DAYS` days before `end`, oldest first: `TICKETS` tickets, each its pull request
    and pipelines, every kind a team's tracker, forge, CI and board send."""
    rng = random.Random(seed_)
    weights = [w for w, _ in KINDS]
    kinds = [k for _, k in KINDS]
    span = DAYS * 86_400
    moments = sorted(end - timedelta(seconds=rng.uniform(0, span)) for _ in range(count))
    found = []
    for n, at in enumerate(moments):
        kind = rng.choices(kinds, weights)[0]
        ticket = rng.randrange(1, TICKETS + 1)
        key = f"PORT-{ticket}"
        when = at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        forge = {"pr_number": 100 + ticket, "branch": f"port-{ticket}-work"}
        document: dict = {
            "schema": "svc.normalized-event/v0",
            "id": f"history:{tag}:{n}",
            "occurred_at": when,
            "subject": {"type": "ticket", "id": key, "initiative_id": "bench", "repo": "acme/portfolio"},
            "dispatch_hints": {"eligible_for_worker": False, "blocked_reason": None, "suggested_role": None},
        }
        if kind == "state_changed":
            before, after = rng.choice(MOVES)
            document.update(
                source="tracker",
                transition={"kind": kind, "from": before, "to": after},
                actor={"kind": "human", "id": rng.choice(PEOPLE), "roles": ["pm"]},
                dispatch_hints={"eligible_for_worker": True, "blocked_reason": None, "suggested_role": "coder"},
            )
            document["subject"].pop("repo")
        elif kind in ("opened", "synchronized", "merged", "closed"):
            bot = rng.random() < 0.6
            document.update(
                source="forge",
                transition={
                    "kind": kind,
                    "from": {"opened": None, "synchronized": None}.get(kind, "open"),
                    "to": {"opened": "open", "synchronized": None, "merged": "merged", "closed": "closed"}[kind],
                },
                actor={"kind": "agent", "id": "github:svc-coder[bot]", "roles": ["coder"]}
                if bot
                else {"kind": "human", "id": "github:mona", "roles": []},
                forge=forge,
            )
            if kind in ("opened", "synchronized"):
                document["dispatch_hints"]["blocked_reason"] = "await_ci"
        elif kind.startswith("pipeline_"):
            status = {"pipeline_started": "running", "pipeline_failed": "failure", "pipeline_passed": "success"}[kind]
            ci = rng.choice(("gitlab:gitlab-ci", "github:github-actions"))
            document.update(
                source="ci",
                transition={"kind": kind, "from": "pending" if status == "running" else "running", "to": status},
                actor={"kind": "system", "id": ci, "roles": []},
                forge={**forge, "pipeline_id": 8000 + n, "pipeline_status": status},
            )
            if kind == "pipeline_failed":
                document["dispatch_hints"] = {
                    "eligible_for_worker": True,
                    "blocked_reason": None,
                    "suggested_role": "fixer",
                }
        elif kind == "needs_you":
            document.update(
                source="svc",
                transition={"kind": kind, "from": "ci", "to": "human_test"},
                # The board's own event (a system actor of svc): recorded `own`, left out of the pages by default.
                actor={"kind": "system", "id": "svc:ci", "roles": []},
            )
            document["subject"].pop("repo")
        else:  # dispatch_requested: the poller asking for a ticket left in queued
            document.update(
                source="poller",
                transition={"kind": kind, "from": None, "to": "queued"},
                actor={"kind": "system", "id": "svc:poller", "roles": []},
                dispatch_hints={"eligible_for_worker": True, "blocked_reason": None, "suggested_role": "coder"},
            )
            document["subject"].pop("repo")
        found.append(document)
    return found


def write_history(path: Path, documents: list[dict]) -> None:
    with path.open("w") as out:
        for document in documents:
            out.write(json.dumps(document, separators=(",", ":")) + "\n")


# -- the databases -------------------------------------------------------------------------------------------


def postgres_url(base: str, name: str) -> str:
    return urlunsplit(urlsplit(base)._replace(path=f"/{name}"))


def fresh_postgres(url: str) -> None:
    """An empty database at `url`: dropped (connections and all) if it is there, and made again."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = sql.Identifier(parts.path.lstrip("/"))
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(name))


def drop_postgres(url: str) -> None:
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(parts.path.lstrip("/"))))


def svc_env(data: Path, url: str) -> dict[str, str]:
    return harness.service_env(
        data, harness.free_port(), url, SVC_ROUTER_ALLOWLIST=",".join(ALLOWLIST), SVC_SNAPSHOT_MAX_AGE="0"
    )


def import_history(data: Path, url: str, path: Path) -> str:
    """`svc import FILE`: its last line (`imported N, duplicates D, rejected R`)."""
    done = subprocess.run(
        [str(harness.BIN / "svc"), "import", str(path)],
        env=svc_env(data, url),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"svc import exited {done.returncode}: {done.stdout[-2000:]} {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def seeded(data: Path, url: str, count: int, end: datetime, *, tag: str) -> dict:
    """A database at `url` holding the board and a year of `count` envelopes imported; its figures."""
    data.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    seed.open_db(url)
    seed.tickets(TICKETS)
    seed.runs(50)
    history = data / "history.jsonl"
    write_history(history, envelopes(count, end=end, tag=tag))
    said = import_history(data, url, history)
    imported = time.monotonic() - started
    # `svc import` counted the settled days it recorded; the jobs process's counter, run again here as it runs once
    # a minute, finds nothing left (the check below says how many days are kept).
    seed.open_db(url)
    seed.scorecard_days()
    return {"import": said, "seconds": imported, "counted_seconds": time.monotonic() - started - imported}


@dataclass
class Landed:
    decisions: int
    distinct: int
    entries: int
    outcomes: dict[str, int] = field(default_factory=dict)
    days: int = 0

    def ok(self, count: int) -> bool:
        judged = sum(n for o, n in self.outcomes.items() if o in ("would_dispatch", "blocked", "stuck"))
        return self.decisions == self.distinct == count and self.entries > 0 and judged > 0 and len(self.outcomes) >= 3


def landed(url: str) -> Landed:
    """What the import left: the decisions, their distinct event ids, the scorecard's entries and counted days."""
    from peewee import fn

    from storage.models import RouterDecision, ScorecardDay, ScorecardEntry

    seed.open_db(url)
    with seed.storage_db.connection():
        return Landed(
            RouterDecision.select().count(),
            RouterDecision.select(fn.COUNT(RouterDecision.event_id.distinct())).scalar() or 0,
            ScorecardEntry.select().count(),
            dict(
                RouterDecision.select(RouterDecision.outcome, fn.COUNT(RouterDecision.id))
                .group_by(RouterDecision.outcome)
                .tuples()
            ),
            ScorecardDay.select(ScorecardDay.day).distinct().count(),
        )


# -- the reads -----------------------------------------------------------------------------------------------


def reads(now: datetime) -> dict[str, str]:
    fortnight = (now - timedelta(days=14)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "decisions API": "/api/v1/router/decisions",
        "decisions page": "/decisions",
        "scorecard 14 days": f"/api/v1/router/scorecard?since={fortnight}",
        "scorecard year": "/api/v1/router/scorecard",
        "snapshot": "/api/v1/ops/snapshot",
        "board": "/",
    }


def check_answer(name: str, answer: requests.Response) -> str | None:
    """What is wrong with an answer, or None: every read is a 200, and the pages of decisions hold 50."""
    if answer.status_code != 200:
        return f"{name}: {answer.status_code} {answer.text[:200]}"
    if name == "decisions API" and len(answer.json()["decisions"]) != PAGE:
        return f"{name}: {len(answer.json()['decisions'])} decisions, not {PAGE}"
    lines = answer.text.count('class="decision line')
    if name == "decisions page" and lines != PAGE:
        return f"{name}: {lines} decision lines, not {PAGE}"
    if name.startswith("scorecard"):
        rules = answer.json()["rules"]
        if not any(rules[role]["agreement"]["settled"] for role in rules):
            return f"{name}: nothing settled"
    return None


@dataclass
class Figures:
    """Each read's median wall time a request, and the service's CPU time a request (every thread of `svc serve`;
    on PostgreSQL the server's own work is not in it), by size: seconds."""

    medians: dict[str, dict[int, float]]
    cpu: dict[str, dict[int, float]]


def measure(
    servers: dict[int, tuple[harness.Process, str]], rounds: int, *, warm: int = 5
) -> tuple[Figures, list[str]]:
    """Each read of each size in turn, `warm` rounds then `rounds` timed: the figures, and what was wrong. The CPU
    time is read from /proc around each request (in clock ticks: summed over the rounds, then divided)."""
    sessions = {size: requests.Session() for size in servers}
    for session in sessions.values():
        session.headers.update(BASIC)
    paths = reads(datetime.now(UTC))
    times: dict[str, dict[int, list[float]]] = {name: {size: [] for size in servers} for name in paths}
    cpu: dict[str, dict[int, float]] = {name: dict.fromkeys(servers, 0.0) for name in paths}
    problems: list[str] = []
    for round_ in range(warm + rounds):
        for name, path in paths.items():
            for size, (process, base) in servers.items():
                cpu_before = process.cpu_seconds()
                started = time.perf_counter()
                answer = sessions[size].get(base + path, timeout=120)
                took = time.perf_counter() - started
                spent = process.cpu_seconds() - cpu_before
                if round_ == 0:
                    wrong = check_answer(name, answer)
                    if wrong:
                        problems.append(f"{size:,}: {wrong}")
                elif answer.status_code != 200:
                    problems.append(f"{size:,}: {name} answered {answer.status_code}")
                if round_ >= warm:
                    times[name][size].append(took)
                    cpu[name][size] += spent
    return (
        Figures(
            {name: {size: statistics.median(v) for size, v in per.items()} for name, per in times.items()},
            {name: {size: total / rounds for size, total in per.items()} for name, per in cpu.items()},
        ),
        problems,
    )


def run_backend(work: Path, backend: str, sizes: list[int], rounds: int, postgres: str, *, keep: bool = False) -> dict:
    print(f"\n== History, flat ({backend}): a year of {' and '.join(f'{s:,}' for s in sizes)} decisions")
    end = datetime.now(UTC) - timedelta(minutes=5)
    urls, datas, figures = {}, {}, {}
    for size in sizes:
        data = work / f"{backend}-{size}"
        if backend == "sqlite":
            url = f"sqlite:///{data / 'svc.sqlite3'}"
        else:
            url = postgres_url(postgres, f"bench_history_{size}")
            fresh_postgres(url)
        urls[size], datas[size] = url, data
        figures[size] = seeded(data, url, size, end, tag=f"{backend}-{size}")
        found = landed(url)
        figures[size]["landed"] = found.__dict__
        print(
            f"   {size:>9,} envelopes: {figures[size]['import']} in {figures[size]['seconds']:.0f} s, the settled days"
            f" counted in {figures[size]['counted_seconds']:.1f} s; {found.decisions:,} decisions under"
            f" {found.distinct:,} ids, {found.entries:,} scorecard entries, {found.days} days counted;"
            f" {', '.join(f'{o} {n:,}' for o, n in sorted(found.outcomes.items()))}"
            f" ({'ok' if found.ok(size) else 'FAILED'})"
        )
        figures[size]["check_ok"] = found.ok(size)
    servers = {}
    try:
        for size in sizes:
            servers[size] = harness.start_service(
                datas[size], urls[size], SVC_ROUTER_ALLOWLIST=",".join(ALLOWLIST), SVC_SNAPSHOT_MAX_AGE="0"
            )
        figures_, problems = measure(servers, rounds)
    finally:
        for process, _ in servers.values():
            process.stop()
        if backend == "postgresql" and not keep:
            for url in urls.values():
                drop_postgres(url)
    small, large = min(sizes), max(sizes)
    print(
        f"   {'read':<20}"
        + "".join(f"{s:>12,}" for s in sizes)
        + f"   ratio (target <= {TARGET})   service CPU a request"
    )
    ratios, cpu_ratios = {}, {}
    for name, per in figures_.medians.items():
        ratio = per[large] / per[small]
        spent = figures_.cpu[name]
        cpu_ratios[name] = spent[large] / spent[small] if spent[small] else 0.0
        ratios[name] = ratio
        print(
            f"   {name:<20}"
            + "".join(f"{per[s] * 1000:>9.2f} ms" for s in sizes)
            + f"   {ratio:5.2f}  ({'met' if ratio <= TARGET else 'MISSED'})"
            + f"   {spent[small] * 1000:6.2f} -> {spent[large] * 1000:6.2f} ms, {cpu_ratios[name]:5.2f}"
        )
    checked = not problems and all(figures[s]["check_ok"] for s in sizes)
    for problem in problems:
        print(f"   FAILED: {problem}")
    print(f"   requests: {'checked, ok' if checked else 'FAILED'}   load average {os.getloadavg()[0]:.2f}")
    return {
        "sizes": sizes,
        "seeded": {str(s): figures[s] for s in sizes},
        "medians_ms": {name: {str(s): v * 1000 for s, v in per.items()} for name, per in figures_.medians.items()},
        "cpu_ms": {name: {str(s): v * 1000 for s, v in per.items()} for name, per in figures_.cpu.items()},
        "ratios": ratios,
        "cpu_ratios": cpu_ratios,
        "target": TARGET,
        "check_ok": checked,
        "problems": problems,
    }


def history(
    work: Path, *, sizes: list[int], backends: list[str], rounds: int, postgres: str, keep: bool = False
) -> dict:
    """`keep`: the PostgreSQL databases are left for a look afterwards (SQLite's files are in `work`)."""
    return {backend: run_backend(work, backend, sizes, rounds, postgres, keep=keep) for backend in backends}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--postgres", default=POSTGRES, help="where the PostgreSQL databases are made (beside it)")
    parser.add_argument("--keep", type=Path, help="seed into this folder and keep it, the PostgreSQL databases too")
    args = parser.parse_args()
    options = {
        "sizes": [int(s) for s in args.sizes.split(",")],
        "backends": args.backends.split(","),
        "rounds": args.rounds,
        "postgres": args.postgres,
    }
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        results = history(args.keep, keep=True, **options)
    else:
        with tempfile.TemporaryDirectory(prefix="svc-history-") as tmp:
            results = history(Path(tmp), **options)
    return 0 if all(r["check_ok"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
