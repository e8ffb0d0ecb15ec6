"""`make bench`: each benchmark measures the service and its physical limit in the same run, on the same
server settings, and prints the figures with their ratio. Raw figures go to bench/out/<date>.json.

    python bench/run.py [http|growth|replay|import|backtest|memory|accounts|dispatch|history ...] [--seconds N]
        [--database URL]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import history as flat_history
import landed
import seed

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CI = {"X-Svc-CI-Secret": harness.CI_SECRET}
BASIC = {"Authorization": "Basic " + base64.b64encode(":".join(harness.BASIC).encode()).decode()}
NOTIFY = json.dumps(
    {"status": "BACKFILL_READY", "missing": 2, "items": [{"date": "2026-11-19"}, {"date": "2026-11-20"}]}
)
EVENT = json.dumps(
    {
        "schema": "svc.normalized-event/v0",
        "id": "bench-{{n}}",
        "occurred_at": "2026-11-20T10:00:00Z",
        "source": "ci",
        "transition": {"kind": "pipeline_failed", "from": "running", "to": "failure"},
        "subject": {"type": "ticket", "id": "PORT-1"},
        "actor": {"kind": "system", "id": "gitlab:gitlab-ci", "roles": []},
        "forge": {"pr_number": 7, "branch": "port-1", "pipeline_id": 8201, "pipeline_status": "failure"},
        "dispatch_hints": {"eligible_for_worker": True, "blocked_reason": None, "suggested_role": "fixer"},
    }
)


def database_url(data: Path, override: str | None) -> str:
    return override or f"sqlite:///{data / 'svc.sqlite3'}"


def verdict(ratio: float, target: float, *, at_least: bool = True) -> str:
    met = ratio >= target if at_least else ratio <= target
    return f"target {'>=' if at_least else '<='} {target}: {'met' if met else 'MISSED'}"


def http_limit(work: Path, seconds: float, db_override: str | None) -> dict:
    print("\n== HTTP limit: the service against the floor (a durable write's least work) and the bare app,")
    print(f"   waitress with {harness.THREADS} threads each")
    storage_text = f"database {db_override}" if db_override else "durable commits (SQLite synchronous=FULL)"
    print(f"   load: {harness.load_tool()}, 16 connections, {seconds:.0f} s per figure; {storage_text}.")
    print("   The floor (bench/floor_app.py) parses the body, checks one field and commits one run, one receipt,")
    print("   one outbox row and a ticket update per request through a group-commit thread on raw sqlite3")
    print("   (WAL, synchronous=FULL), with one access line: no durable notify can cost less on this stack.")
    print("   The ceilings (bench/ceiling_app.py) do what the service owes a notify and an event and nothing")
    print("   else, as directly as Python allows: its schema and statements, the credentials, the schema check,")
    print("   the JSON access line, the metrics and the contract's answer. The service cannot beat them.")
    print("   bare, floor, the ceilings, notify and events are measured one after another, pinned (the server's")
    print("   threads on core 0 with taskset -a, wrk on core 1), then again unpinned; ratios are to the floor of")
    print("   the same round. cpu is the server's CPU time per answered request (all its threads); 'by cpu' is")
    print("   floor cpu / service cpu. Each figure's requests are checked against the rows they left.")
    if db_override:
        print("   (the floor writes to SQLite whatever --database says: it is the limit of this stack's durable write;")
        print("   the ceilings are SQLite's, and are left out)")
    data = work / "http"
    data.mkdir()
    url = database_url(data, db_override)
    seed.open_db(url)
    seed.tickets(10_000)
    seed.runs(50)
    ceilings = []
    if not db_override:  # the ceiling runs on a copy of the service's seeded database
        ceiling_db = work / "ceiling.sqlite3"
        with seed.storage_db.connection():
            seed.storage_db.db.execute_sql("VACUUM INTO ?", [str(ceiling_db)])
        ceiling, ceiling_base = harness.start_ceiling(work, ceiling_db)
        ceilings = [
            (
                f"ceiling {name}",
                ceiling,
                ceiling_base,
                f"/ceiling/{name}",
                body,
                CI,
                None,
                lambda load, before, check=check: landed.within(ceiling_db, check, load, before),
                lambda: landed.within(ceiling_db, landed.mark),
            )
            for name, body, check in (("notify", NOTIFY, landed.notify), ("events", EVENT, landed.events))
        ]
    bare, bare_base = harness.start_bare(work)
    floor, floor_base, floor_db = harness.start_floor(work)
    service, base = harness.start_service(data, url)
    computing, computing_base = harness.start_service(work / "http", url, SVC_SNAPSHOT_MAX_AGE="0")
    rounds = [("pinned", "0", "1"), ("unpinned", None, None)]
    if harness.cores() < 2:
        print(f"   this machine gives {harness.cores()} core: nothing can be pinned apart, every figure is unpinned")
        rounds = [("unpinned", None, None)]
    writes = [
        ("bare", bare, bare_base, "/bare", NOTIFY, {}, None, lambda load, _: landed.reads(load), lambda: None),
        (
            "floor",
            floor,
            floor_base,
            "/floor",
            NOTIFY,
            {},
            None,
            lambda load, before: landed.floor(load, before, floor_db),
            lambda: landed.floor_mark(floor_db),
        ),
        *ceilings,
        ("notify", service, base, "/api/v1/agents/writing/notify", NOTIFY, CI, 0.8, landed.notify, landed.mark),
        ("events", service, base, "/api/v1/events", EVENT, CI, 0.8, landed.events, landed.mark),
    ]
    out: dict = {}
    checks_ok = True
    try:
        for mode, server_cpus, load_cpus in rounds:
            print(f"   -- {mode}" + (f": server on core {server_cpus}, wrk on core {load_cpus}" if server_cpus else ""))
            figures: dict = {}
            for name, process, target, path, body, headers, goal, check, marker in writes:
                harness.pin(process, server_cpus)
                try:
                    harness.run_load(target, "POST", path, body=body, headers=headers, seconds=1)  # warm up
                    before = landed.settled(marker)
                    load = harness.run_load(
                        target,
                        "POST",
                        path,
                        body=body,
                        headers=headers,
                        seconds=seconds,
                        process=process,
                        load_cpus=load_cpus,
                    )
                finally:
                    harness.pin(process, None)
                verdict_ = check(load, before)
                checks_ok &= verdict_.ok
                figures[name] = load
                if name == "bare":
                    said = ""
                elif name == "floor":
                    bare_load = figures["bare"]
                    said = (
                        f"   {load.rps / bare_load.rps:.2f} of bare, by cpu {bare_load.cpu_ms / load.cpu_ms:.2f}"
                        if load.cpu_ms
                        else ""
                    )
                else:
                    floor_load = figures["floor"]
                    ratio = load.rps / floor_load.rps
                    by_cpu = floor_load.cpu_ms / load.cpu_ms if load.cpu_ms else 0.0
                    said = f"   ratio {ratio:.2f} of the floor, by cpu {by_cpu:.2f}"
                    if goal is not None and (mode == "pinned" or len(rounds) == 1):
                        said += f" ({verdict(ratio, goal)})"
                    ceiling_load = figures.get(f"ceiling {name}")
                    if ceiling_load is not None:
                        said += f", {load.rps / ceiling_load.rps:.2f} of its ceiling"
                print(f"   {name:<14} {load.line()}{said}   load average {os.getloadavg()[0]:.2f}")
                print(f"     requests: {verdict_.text}: {'ok' if verdict_.ok else 'FAILED'}")
                out.setdefault(mode, {})[name] = {
                    **harness.as_dict(load),
                    "check": verdict_.text,
                    "check_ok": verdict_.ok,
                    "load_average": os.getloadavg()[0],
                }
            for name in ("notify", "events", *(c[0] for c in ceilings)):
                load, floor_load = figures[name], figures["floor"]
                out[mode][name]["ratio_to_floor"] = load.rps / floor_load.rps
                out[mode][name]["ratio_to_floor_by_cpu"] = floor_load.cpu_ms / load.cpu_ms if load.cpu_ms else 0.0
                ceiling_load = figures.get(f"ceiling {name}")
                if ceiling_load is not None:
                    out[mode][name]["ratio_to_ceiling"] = load.rps / ceiling_load.rps
                    out[mode][name]["ratio_to_ceiling_by_cpu"] = (
                        ceiling_load.cpu_ms / load.cpu_ms if load.cpu_ms else 0.0
                    )
            out[mode]["floor"]["ratio_to_bare"] = figures["floor"].rps / figures["bare"].rps
        _headline(out, [mode for mode, _, _ in rounds])
        print("   -- the snapshot against the bare app (unpinned)")
        reads = [
            ("snapshot (10,000 tickets)", service, base, 0.3),
            ("  rendered every request", computing, computing_base, 0.3),
        ]
        for name, process, target, goal in reads:
            harness.run_load(target, "GET", "/api/v1/ops/snapshot", headers=BASIC, seconds=1)  # warm up
            limit = harness.run_load(bare_base, "GET", "/bare", seconds=seconds, process=bare)
            load = harness.run_load(
                target, "GET", "/api/v1/ops/snapshot", headers=BASIC, seconds=seconds, process=process
            )
            ratio = load.rps / limit.rps
            by_cpu = limit.cpu_ms / load.cpu_ms if load.cpu_ms else 0.0
            verdicts = [landed.reads(limit), landed.reads(load)]
            checks_ok &= all(v.ok for v in verdicts)
            print(f"   bare GET                   {limit.line()}")
            print(
                f"   {name:<26} {load.line()}   ratio {ratio:.2f}, by cpu {by_cpu:.2f} ({verdict(ratio, goal)})"
                f"   load average {os.getloadavg()[0]:.2f}"
            )
            print(f"     requests: bare {verdicts[0].text}: {'ok' if verdicts[0].ok else 'FAILED'}")
            print(f"     requests: {verdicts[1].text}: {'ok' if verdicts[1].ok else 'FAILED'}")
            out[name.strip()] = {
                **harness.as_dict(load),
                "bare": harness.as_dict(limit),
                "ratio": ratio,
                "ratio_by_cpu": by_cpu,
                "target": goal,
                "check": verdicts[1].text,
                "check_ok": verdicts[1].ok,
                "load_average": os.getloadavg()[0],
            }
    finally:
        for process in (bare, floor, service, computing, *{c[1] for c in ceilings}):
            process.stop()
    print(f"   request checks: {'all ok' if checks_ok else 'FAILED (see above)'}")
    return out


def _headline(out: dict, modes: list[str]) -> None:
    """The ratios to the floor, pinned first (the headline), the unpinned beside them."""
    head = modes[0]
    print(f"   == against the floor, {head}" + (f" ({', '.join(modes[1:])} beside)" if modes[1:] else ""))
    floor = "   floor / bare:  " + "   ".join(f"{mode} {out[mode]['floor']['ratio_to_bare']:.2f}" for mode in modes)
    print(floor)
    for name in ("notify", "events"):
        first = out[head][name]
        line = (
            f"   {name:<8} {first['ratio_to_floor']:.2f} of the floor, by cpu {first['ratio_to_floor_by_cpu']:.2f}"
            f" ({verdict(first['ratio_to_floor'], 0.8)})"
        )
        for mode in modes[1:]:
            other = out[mode][name]
            line += f";   {mode} {other['ratio_to_floor']:.2f}, by cpu {other['ratio_to_floor_by_cpu']:.2f}"
        print(line)
        ceiling = out[head].get(f"ceiling {name}")
        if ceiling is not None:
            print(
                f"            its ceiling {ceiling['ratio_to_floor']:.2f} of the floor, by cpu"
                f" {ceiling['ratio_to_floor_by_cpu']:.2f}: the most any code keeping what the service owes could"
                f" reach; {name} is {first['ratio_to_ceiling']:.2f} of it,"
                f" by cpu {first['ratio_to_ceiling_by_cpu']:.2f}"
            )


def growth(work: Path, sizes: list[int], db_override: str | None) -> dict:
    print("\n== Growth: the cost of one request as the board grows (p50 of 300 requests, the sizes interleaved)")
    if db_override and len(sizes) > 1:
        print("   (PostgreSQL: one database, so the sizes run one after another, not interleaved)")
    servers: dict[int, tuple] = {}
    figures: dict[int, dict] = {}
    try:
        for size in sizes:
            data = work / f"growth-{size}"
            data.mkdir()
            url = database_url(data, db_override)
            if db_override:
                reset_postgres(db_override)
            started = time.monotonic()
            seed.open_db(url)
            seed.tickets(size)
            seed.decisions(size * 10, size)
            seed.runs(50)
            print(f"   {size:>7,} tickets, {size * 10:>9,} decisions seeded in {time.monotonic() - started:.0f} s")
            # The snapshot is measured as computed, not as served from the short render cache.
            service, base = harness.start_service(data, url, SVC_SNAPSHOT_MAX_AGE="0")
            session = requests.Session()
            session.headers.update(BASIC)
            servers[size] = (service, base, session)
            if db_override:  # one database: measure this size before the next replaces it
                figures.update(_growth_figures({size: servers[size]}))
                servers.pop(size)[0].stop()
        if not db_override:
            for service, _, _ in servers.values():  # they waited idle while the larger boards were seeded
                service.check_alive()
            figures = _growth_figures(servers)
    finally:
        for service, _, _ in servers.values():
            service.stop()
    largest = max(sizes)
    LARGEST_BOARD.update(
        url=database_url(work / f"growth-{largest}", db_override), data=work / f"growth-{largest}", tickets=largest
    )
    names = list(figures[sizes[0]])
    print("   " + f"{'':<20}" + "".join(f"{s:>12,}" for s in sizes) + "   ratio largest/smallest")
    ratios = {}
    for name in names:
        values = [figures[s][name]["p50_ms"] for s in sizes]
        ratio = values[-1] / values[0]
        target = 3.0 if name == "snapshot" else 1.5
        print(
            "   "
            + f"{name:<20}"
            + "".join(f"{v:>9.2f} ms" for v in values)
            + f"   {ratio:5.2f}  ({verdict(ratio, target, at_least=False)})"
        )
        ratios[name] = {"ratio": ratio, "target": target}
    return {"figures": {str(k): v for k, v in figures.items()}, "ratios": ratios}


def _growth_figures(servers: dict[int, tuple], rounds: int = 300) -> dict:
    """Round-robin over the sizes, one request each per round, so the machine's noise falls on all of them."""
    paths = {}
    for size, (_, base, session) in servers.items():
        deep = session.get(base + "/api/v1/router/decisions?limit=50", timeout=60).json()["next"]
        for _ in range(20):  # twenty pages in: a page must cost the same however far it is
            deep = session.get(base + f"/api/v1/router/decisions?limit=50&cursor={deep}", timeout=60).json()["next"]
        paths[size] = {
            "snapshot": "/api/v1/ops/snapshot",
            "needs_you": "/api/v1/tickets?needs_you=true&limit=50",
            "decisions page": "/api/v1/router/decisions?limit=50",
            "decisions page 21": f"/api/v1/router/decisions?limit=50&cursor={deep}",
            "tickets page": "/api/v1/tickets?limit=50",
            # The router's scorecard over the whole history: kept days, never a scan of it.
            "scorecard": "/api/v1/router/scorecard",
        }
    times: dict[int, dict[str, list[float]]] = {size: {name: [] for name in paths[size]} for size in servers}
    for round_ in range(rounds + 20):
        for name in paths[next(iter(servers))]:
            for size, (_, base, session) in servers.items():
                started = time.perf_counter()
                session.get(base + paths[size][name], timeout=60).raise_for_status()
                if round_ >= 20:  # the first rounds warm the caches
                    times[size][name].append(time.perf_counter() - started)
    return {
        size: {name: harness.latency_figures(values) for name, values in per.items()} for size, per in times.items()
    }


def reset_postgres(url: str) -> None:
    """An empty database at `url`: its tables dropped, or the database created (from the server's `postgres`
    database) when there is none by that name yet."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as admin:
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        if tables:
            conn.execute("DROP TABLE " + ", ".join(f'"{t}"' for t in tables) + " CASCADE")


def replay(work: Path, lines: int) -> dict:
    print(f"\n== Replay: `svc replay` on {lines:,} envelopes against a floor that only parses and validates them")
    history = work / "history.jsonl"
    small = work / "history-small.jsonl"
    _write_history(history, lines)
    _write_history(small, lines // 4)
    snapshot = REPO / "examples" / "replay" / "snapshot.json"
    svc = str(Path(sys.executable).with_name("svc"))
    # Both are one thread reading a file and writing to /dev/null: on an idle machine their CPU time is their
    # wall time, and on a shared one it is the figure the neighbours disturb least, so the verdict is by CPU.
    # Even so one run's CPU time moves by up to a tenth from one minute to the next here: each is run three times,
    # alternating, and the least of each (the least disturbed) is the figure.
    floors, fulls = [], []
    for _ in range(3):
        floors.append(_measure([sys.executable, str(HERE / "replay_floor.py"), str(history)], keep_stdout=True))
        fulls.append(_measure([svc, "replay", str(history), "--snapshot", str(snapshot)]))
    floor = min(floors, key=lambda figures: figures["cpu_seconds"])
    full = min(fulls, key=lambda figures: figures["cpu_seconds"])
    quarter = _measure([svc, "replay", str(small), "--snapshot", str(snapshot)])
    runs = ", ".join(f"{f['cpu_seconds']:.2f}/{r['cpu_seconds']:.2f}" for f, r in zip(floors, fulls, strict=True))
    ratio = floor["cpu_seconds"] / full["cpu_seconds"]
    wall_ratio = floor["seconds"] / full["seconds"]
    memory = full["max_rss_kib"] / quarter["max_rss_kib"]
    verdicts = [_replay_check(lines, f, r) for f, r in zip(floors, fulls, strict=True)]
    checked, check_text = all(ok for ok, _ in verdicts), verdicts[0][1] + " (each of the three runs)"
    print(
        f"   floor (parse + validation)          {floor['seconds']:7.2f} s   {lines / floor['seconds']:9.0f} lines/s"
        f"   cpu {floor['cpu_seconds']:6.2f} s"
    )
    print(
        f"   svc replay                          {full['seconds']:7.2f} s   {lines / full['seconds']:9.0f} lines/s"
        f"   cpu {full['cpu_seconds']:6.2f} s   ratio by cpu {ratio:.2f} of the floor ({verdict(ratio, 0.5)}),"
        f" by wall {wall_ratio:.2f}"
    )
    print(f"   cpu seconds of each run, floor/replay: {runs} (the least of each is the figure)")
    print(
        f"   memory: max RSS {quarter['max_rss_kib'] / 1024:.1f} MiB at {lines // 4:,} lines, "
        f"{full['max_rss_kib'] / 1024:.1f} MiB at {lines:,} lines: x{memory:.2f} "
        f"({'flat' if memory < 1.2 else 'GROWS'})"
    )
    print(f"   requests: {check_text}: {'ok' if checked else 'FAILED'}   load average {os.getloadavg()[0]:.2f}")
    for figures in (*floors, *fulls, quarter):
        figures.pop("stdout", None)
    return {
        "lines": lines,
        "floor": floor,
        "replay": full,
        "replay_quarter": quarter,
        "runs_cpu_seconds": [[f["cpu_seconds"], r["cpu_seconds"]] for f, r in zip(floors, fulls, strict=True)],
        "ratio": ratio,
        "wall_ratio": wall_ratio,
        "memory_ratio": memory,
        "check": check_text,
        "check_ok": checked,
    }


def import_history(work: Path, lines: int, db_override: str | None) -> dict:
    """`svc import` against `svc replay` over the same generated history (examples/history/generate.py): the same
    routing, and what import adds, the recording (a decision, its accepted id, its scorecard entry, its signals),
    batched commits included. Each import starts from an empty database; each run's rows are counted."""
    print(f"\n== Import: `svc import` of a generated year of history against `svc replay` of the same file ({lines:,})")
    history = work / "import-history.jsonl"
    written = _write_generated_history(history, lines)
    one_by_one = work / "import-slice.jsonl"
    with history.open() as source, one_by_one.open("w") as out:
        for _, line in zip(range(IMPORT_SLICE), source, strict=False):
            out.write(line)
    svc = str(Path(sys.executable).with_name("svc"))
    imports, replays, checks = [], [], []
    for n in range(3):
        data, url = _fresh(work / f"import-{n}", db_override)
        env = ["env", *(f"{k}={v}" for k, v in harness.service_env(data, 8080, url).items())]
        imports.append(_measure([*env, svc, "import", str(history)], keep_stdout=True))
        checks.append(_import_check(url, written, imports[-1]["stdout"]))
        replays.append(_measure([*env, svc, "replay", str(history)]))
    again = _measure([*env, svc, "import", str(history)], keep_stdout=True)
    duplicates_ok = again["stdout"].strip() == f"imported 0, duplicates {written}, rejected 0"
    # Batched against one envelope per transaction, on the first IMPORT_SLICE lines, each into an empty database.
    sliced = {}
    for batch in (1, 250):
        data, url = _fresh(work / f"import-batch-{batch}", db_override)
        env = ["env", *(f"{k}={v}" for k, v in harness.service_env(data, 8080, url).items())]
        sliced[batch] = _measure([*env, sys.executable, str(HERE / "import_batch.py"), str(one_by_one), str(batch)])
    full = min(imports, key=lambda figures: figures["cpu_seconds"])
    replay_run = min(replays, key=lambda figures: figures["cpu_seconds"])
    rate, wall_rate = written / full["cpu_seconds"], written / full["seconds"]
    replay_rate, replay_wall = written / replay_run["cpu_seconds"], written / replay_run["seconds"]
    ratio, wall_ratio = rate / replay_rate, wall_rate / replay_wall
    print(f"   {written:,} envelopes ({IMPORT_DAYS} days), on {'PostgreSQL' if db_override else 'SQLite'}")
    print(
        f"   svc replay                          {replay_run['seconds']:7.2f} s   {replay_wall:9.0f} lines/s"
        f"   cpu {replay_run['cpu_seconds']:6.2f} s ({replay_rate:,.0f} lines/s by cpu)"
    )
    print(
        f"   svc import                          {full['seconds']:7.2f} s   {wall_rate:9.0f} lines/s"
        f"   cpu {full['cpu_seconds']:6.2f} s ({rate:,.0f} lines/s by cpu)"
    )
    # On PostgreSQL the server's CPU is not in the import's: its ratio by CPU is reported, and judged on SQLite only.
    judged = "PostgreSQL's server not counted: no target" if db_override else verdict(ratio, IMPORT_TARGET)
    print(
        f"   import / replay: {ratio:.2f} by cpu ({judged}), {wall_ratio:.2f} by wall; "
        f"the same file again (all duplicates): {written / again['seconds']:,.0f} lines/s"
    )
    runs = ", ".join(f"{i['cpu_seconds']:.2f}/{r['cpu_seconds']:.2f}" for i, r in zip(imports, replays, strict=True))
    print(f"   cpu seconds of each run, import/replay: {runs} (the least of each is the figure)")
    one, many = sliced[1], sliced[250]
    print(
        f"   batches, first {IMPORT_SLICE:,} lines: one envelope per transaction {IMPORT_SLICE / one['seconds']:,.0f}"
        f" lines/s (cpu {one['cpu_seconds']:.2f} s), {IMPORT_SLICE // 250 + 1} transactions of 250 "
        f"{IMPORT_SLICE / many['seconds']:,.0f} lines/s (cpu {many['cpu_seconds']:.2f} s): "
        f"x{one['seconds'] / many['seconds']:.1f} by wall"
    )
    ok = all(passed for passed, _ in checks) and duplicates_ok
    print(
        f"   rows: {checks[0][1]} (each of the three runs); again: {again['stdout'].strip()}: "
        f"{'ok' if ok else 'FAILED'}   load average {os.getloadavg()[0]:.2f}"
    )
    for figures in (*imports, *replays, again):
        figures.pop("stdout", None)
    return {
        "envelopes": written,
        "import": full,
        "replay": replay_run,
        "runs_cpu_seconds": [[i["cpu_seconds"], r["cpu_seconds"]] for i, r in zip(imports, replays, strict=True)],
        "import_per_cpu_second": rate,
        "replay_per_cpu_second": replay_rate,
        "ratio": ratio,
        "wall_ratio": wall_ratio,
        "again_all_duplicates": again,
        "batch_1": one,
        "batch_250": many,
        "check_ok": ok,
    }


# The import's history: a year, about 5 envelopes a ticket; its target against replay's rate (bench/RESULTS.md).
IMPORT_DAYS = 365
IMPORT_SLICE = 5_000
IMPORT_TARGET = 0.15


def _write_generated_history(path: Path, lines: int) -> int:
    """About `lines` envelopes of examples/history/generate.py's made-up team over a year that ended yesterday;
    returns how many were written."""
    sys.path.insert(0, str(REPO / "examples" / "history"))
    import generate

    start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=IMPORT_DAYS + 3)
    per_day = max(1, round(lines / IMPORT_DAYS / 5))
    written = 0
    with path.open("w") as out:
        for document in generate.history(days=IMPORT_DAYS, per_day=per_day, start=start):
            out.write(json.dumps(document, separators=(",", ":")) + "\n")
            written += 1
    return written


def _fresh(data: Path, db_override: str | None) -> tuple[Path, str]:
    """An empty data folder and database (PostgreSQL's tables dropped), migrated."""
    data.mkdir()
    url = database_url(data, db_override)
    if db_override:
        reset_postgres(db_override)
    seed.open_db(url)
    return data, url


def _import_check(url: str, written: int, said: str) -> tuple[bool, str]:
    """The command said it imported every line, and as many decisions are recorded, and accepted ids."""
    from storage.models import AcceptedEvent, RouterDecision

    seed.open_db(url)
    with seed.storage_db.connection():
        recorded = RouterDecision.select().count()
        accepted = AcceptedEvent.select().count()
    expected = f"imported {written}, duplicates 0, rejected 0"
    ok = said.strip() == expected and recorded == accepted == written
    return ok, f"said {said.strip()!r}; {recorded:,} decisions and {accepted:,} accepted ids recorded"


# The growth benchmark's largest board (1,000,000 decisions at the default sizes), for the backtest benchmark.
LARGEST_BOARD: dict = {}


def backtest(work: Path, replay_result: dict | None, db_override: str | None) -> dict:
    """`svc backtest` over the growth benchmark's largest history: decisions per second against `svc replay`'s
    lines per second in the same run, and memory at a quarter of the range and at all of it."""
    if not LARGEST_BOARD:
        data = work / "backtest"
        data.mkdir()
        url = database_url(data, db_override)
        if db_override:
            reset_postgres(db_override)
        seed.open_db(url)
        seed.tickets(100_000)
        seed.decisions(1_000_000, 100_000)
        LARGEST_BOARD.update(url=url, data=data, tickets=100_000)
    url, data = LARGEST_BOARD["url"], LARGEST_BOARD["data"]
    seed.open_db(url)
    with seed.storage_db.connection():
        from storage.models import RouterDecision

        total = RouterDecision.select().where(RouterDecision.outcome != "rejected").count()
        first = RouterDecision.select(seed.fn.MIN(RouterDecision.evaluated_at)).scalar()
        last = RouterDecision.select(seed.fn.MAX(RouterDecision.evaluated_at)).scalar()
        first, last = (RouterDecision.evaluated_at.python_value(v) for v in (first, last))
        cut = last - (last - first) / 4
        in_quarter = (
            RouterDecision.select()
            .where((RouterDecision.outcome != "rejected") & (RouterDecision.evaluated_at >= cut))
            .count()
        )
    print(f"\n== Backtest: `svc backtest` over {total:,} recorded decisions (the growth benchmark's largest board)")
    svc = str(Path(sys.executable).with_name("svc"))
    env = ["env", f"DATABASE_URL={url}", f"SVC_DATA_DIR={data}", "SVC_ROUTER_ALLOWLIST=" + ",".join(seed.ALLOWLIST)]
    since = cut.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    recorded = _measure([*env, svc, "backtest", "--format", "json"], keep_stdout=True)
    full = _measure([*env, svc, "backtest", "--retry-budget", "3", "--format", "json"], keep_stdout=True)
    quarter = _measure(
        [*env, svc, "backtest", "--retry-budget", "3", "--since", since, "--format", "json"], keep_stdout=True
    )
    reports = {
        name: json.loads(m.pop("stdout")) for name, m in (("recorded", recorded), ("full", full), ("quarter", quarter))
    }
    rate = reports["full"]["evaluated"] / full["cpu_seconds"]
    wall_rate = reports["full"]["evaluated"] / full["seconds"]
    memory = full["max_rss_kib"] / quarter["max_rss_kib"]
    print(
        f"   svc backtest --retry-budget 3       {full['seconds']:7.2f} s   {wall_rate:9.0f} decisions/s"
        f"   cpu {full['cpu_seconds']:6.2f} s ({rate:,.0f} decisions/s by cpu); flipped {reports['full']['flipped']:,}"
    )
    verdict_text = "no replay figure in this run"
    ratio = None
    if replay_result:
        replay_rate = replay_result["lines"] / replay_result["replay"]["cpu_seconds"]
        ratio = rate / replay_rate
        verdict_text = f"{ratio:.2f} x svc replay's {replay_rate:,.0f} lines/s by cpu ({verdict(ratio, 1.0)})"
    print(f"   against replay: {verdict_text}")
    print(
        f"   memory: max RSS {quarter['max_rss_kib'] / 1024:.1f} MiB at {reports['quarter']['evaluated']:,} decisions, "
        f"{full['max_rss_kib'] / 1024:.1f} MiB at {reports['full']['evaluated']:,}: x{memory:.2f} "
        f"({'flat' if memory < 1.2 else 'GROWS'})"
    )
    same = reports["recorded"]
    checks = [
        (same["evaluated"] == total and reports["full"]["evaluated"] == total, "every accepted decision evaluated"),
        (reports["quarter"]["evaluated"] == in_quarter, "the quarter range evaluated exactly the decisions in it"),
        (same["flipped"] == 0 and same["unchanged"] == total, "under the recorded policy nothing flips"),
        (
            all(r["unchanged"] + r["flipped"] + r["not_replayable"] == r["evaluated"] for r in reports.values()),
            "unchanged + flipped + not replayable = evaluated",
        ),
        (reports["full"]["flipped"] > 0, "the candidate (retry budget 3) flips some"),
    ]
    ok = all(passed for passed, _ in checks)
    print(
        "   requests: "
        + "; ".join(f"{what}: {'ok' if passed else 'FAILED'}" for passed, what in checks)
        + f"   load average {os.getloadavg()[0]:.2f}"
    )
    return {
        "decisions": total,
        "recorded_policy": recorded,
        "candidate": full,
        "candidate_quarter": quarter,
        "reports": {name: {k: v for k, v in r.items() if k != "flips"} for name, r in reports.items()},
        "decisions_per_cpu_second": rate,
        "ratio_to_replay": ratio,
        "memory_ratio": memory,
        "checks_ok": ok,
    }


def _write_history(path: Path, lines: int) -> None:
    examples = sorted((REPO / "examples" / "envelopes" / "valid").glob("*.json"))
    envelopes = [json.loads(p.read_text()) for p in examples]
    with path.open("w") as out:
        for n in range(lines):
            envelope = dict(envelopes[n % len(envelopes)])
            envelope["id"] = f"replay-{n}"
            out.write(json.dumps(envelope, separators=(",", ":")) + "\n")


def _measure(args: list[str], *, keep_stdout: bool = False) -> dict:
    """Wall time and peak resident memory of one command, measured by a fresh parent of its own; its stderr
    (and, with `keep_stdout`, its stdout) are kept for the checks."""
    probe = (
        "import resource, subprocess, sys, time; keep = sys.argv[1] == '1'; s = time.perf_counter(); "
        "r = subprocess.run(sys.argv[2:], stdout=None if keep else subprocess.DEVNULL, stderr=sys.stderr); "
        "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print(time.perf_counter() - s, u.ru_maxrss, r.returncode, u.ru_utime + u.ru_stime, file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "1" if keep_stdout else "0", *args], capture_output=True, text=True, check=True
    )
    *said, last = done.stderr.strip().splitlines()
    seconds, rss, code, cpu = last.split()
    if code != "0":
        raise RuntimeError(f"{args} exited with {code}: {done.stderr}")
    return {
        "seconds": float(seconds),
        "cpu_seconds": float(cpu),
        "max_rss_kib": int(rss),
        "stdout": done.stdout,
        "stderr": "\n".join(said),
    }


def _replay_check(lines: int, floor: dict, full: dict) -> tuple[bool, str]:
    """Every line a distinct, valid envelope: the floor found them all valid, and replay decided each once."""
    valid = int(floor["stdout"].split()[-1])
    said = full["stderr"]
    replayed = int(said.split("replayed ", 1)[1].split()[0])
    rejected = int(said.split("rejected ", 1)[1].split(",")[0])
    duplicates = int(said.split("duplicates ", 1)[1].split(";")[0])
    ok = valid == lines and replayed == lines and rejected == 0 and duplicates == 0
    return ok, (
        f"{lines:,} lines written with distinct ids; the floor found {valid:,} valid; replay decided {replayed:,}, "
        f"rejected {rejected:,}, duplicates {duplicates:,}"
    )


def memory(work: Path, db_override: str | None) -> dict:
    print("\n== Memory: the API's resident memory after ~1,000 and after 100,000 more requests (notify, events, reads)")
    data = work / "memory"
    data.mkdir()
    url = database_url(data, db_override)
    if db_override:
        reset_postgres(db_override)
    seed.open_db(url)
    seed.tickets(1_000)
    # wrk opens its 16 connections again for every phase, back to back, from one address: the previous phase's may
    # not be closed on the server's side yet, so the per-client cap (20 by default) is raised for this load.
    service, base = harness.start_service(data, url, SVC_MAX_CONNECTIONS_PER_CLIENT="64")
    mix = [
        ("POST", "/api/v1/agents/writing/notify", NOTIFY, CI),
        ("POST", "/api/v1/events", EVENT, CI),
        ("GET", "/api/v1/tickets?limit=50", None, BASIC),
        ("GET", "/api/v1/ops/snapshot", None, BASIC),
    ]
    statuses: dict[str, dict[int, int]] = {}
    try:
        first = _until(base, mix, 1_000, seconds=1, statuses=statuses)
        after_first = service.rss_kib()
        more = _until(base, mix, 100_000, seconds=5, statuses=statuses)
        after_more = service.rss_kib()
    finally:
        service.stop()
    ratio = after_more / after_first
    print(
        f"   after {first:,} requests: {after_first / 1024:.1f} MiB; after {first + more:,}: "
        f"{after_more / 1024:.1f} MiB; x{ratio:.2f} ({verdict(ratio, 1.2, at_least=False)})"
        f"   load average {os.getloadavg()[0]:.2f}"
    )
    # Every write is new work: each notify a report (200), each event a new id (202, never a 200 replay).
    expected = {"/api/v1/events": 202}
    checked = all(set(by) == {expected.get(path, 200)} for path, by in statuses.items())
    shown = "; ".join(
        f"{path.split('?')[0].removeprefix('/api/v1/')} " + ", ".join(f"{n:,} x {s}" for s, n in sorted(by.items()))
        for path, by in statuses.items()
    )
    print(f"   requests: {shown}: {'ok' if checked else 'FAILED'}")
    return {
        "statuses": {path: {str(k): v for k, v in by.items()} for path, by in statuses.items()},
        "check_ok": checked,
        "requests_first": first,
        "rss_first_kib": after_first,
        "requests_total": first + more,
        "rss_total_kib": after_more,
        "ratio": ratio,
    }


def _until(base: str, mix: list, count: int, *, seconds: int, statuses: dict) -> int:
    """Go round `mix` in phases of `seconds` until at least `count` requests were answered; return how many.
    `statuses` collects, per path, the answers by status.

    wrk runs for its whole duration whatever it has sent, so counts come from short timed phases."""
    done = 0
    while done < count:
        for method, path, body, headers in mix:
            load = harness.run_load(base, method, path, body=body, headers=headers, seconds=seconds)
            done += load.requests
            mine = statuses.setdefault(path, {})
            for status, n in load.statuses.items():
                mine[status] = mine.get(status, 0) + n
    return done


def _seeded(data: Path, db_override: str | None) -> tuple[Path, str]:
    """A data folder and a database (PostgreSQL's emptied first) holding a board of 1,000 tickets."""
    data.mkdir()
    url = database_url(data, db_override)
    if db_override:
        reset_postgres(db_override)
    seed.open_db(url)
    seed.tickets(1_000)
    return data, url


def _add_account(data: Path, url: str, account: tuple[str, str], role: str) -> None:
    """`svc user add`, the password piped as a person's script does."""
    added = subprocess.run(
        [str(Path(sys.executable).with_name("svc")), "user", "add", account[0], "--role", role],
        input=account[1] + "\n",
        env=harness.service_env(data, harness.free_port(), url),
        capture_output=True,
        text=True,
        check=False,
    )
    if added.returncode != 0:
        raise RuntimeError(f"svc user add failed: {added.stderr}")


def accounts(work: Path, seconds: float, db_override: str | None) -> dict:
    """A named account against the bootstrap credentials on the same request and server: the account's argon2id
    check is paid once and then remembered, so the two should cost the same."""
    print("\n== Accounts: GET /api/v1/tickets with a named account against the same request with SVC_BASIC_AUTH")
    data, url = _seeded(work / "accounts", db_override)
    person = ("bench-person", "bench-person-password-1")
    _add_account(data, url, person, "viewer")
    named = {"Authorization": "Basic " + base64.b64encode(":".join(person).encode()).decode()}
    service, base = harness.start_service(data, url)
    path = "/api/v1/tickets?limit=50"
    figures: dict[str, list] = {"SVC_BASIC_AUTH": [], "named account": []}
    try:
        # Sign in once, as a person does: wrk's 16 connections asking at once while the first argon2id check runs
        # would mostly be answered 429 (only 4 requests may wait for a check).
        signed_in = requests.get(base + path, headers=named, timeout=30)
        if signed_in.status_code != 200:
            raise RuntimeError(f"the named account was refused: {signed_in.status_code} {signed_in.text}")
        for _ in range(2):  # interleaved, so the machine's noise falls on both
            for name, headers in (("SVC_BASIC_AUTH", BASIC), ("named account", named)):
                load = harness.run_load(base, "GET", path, headers=headers, seconds=seconds)
                figures[name].append(load)
                print(f"   {name:<16} {load.line()}")
    finally:
        service.stop()
    hit, first = _remembered_check_cost(person)
    print(f"   in-process: the first check of the account {first * 1000:.0f} ms (argon2id), then {hit * 1e6:.1f} µs")
    rps = {name: sum(load.rps for load in loads) / len(loads) for name, loads in figures.items()}
    ratio = rps["named account"] / rps["SVC_BASIC_AUTH"]
    errors = sum(load.errors for loads in figures.values() for load in loads)
    print(
        f"   named account / SVC_BASIC_AUTH: {ratio:.3f} of the throughput, {errors} errors "
        f"({verdict(ratio, 0.9)}, i.e. within 10 %)"
    )
    return {name: [harness.as_dict(load) for load in loads] for name, loads in figures.items()} | {
        "ratio": ratio,
        "target": 0.9,
    }


def _remembered_check_cost(person: tuple[str, str], rounds: int = 100_000) -> tuple[float, float]:
    """Seconds for one remembered check of `person`'s credentials, and for the first (argon2id) one."""
    from api.auth import PeopleCredentials

    people = PeopleCredentials()
    given = ":".join(person).encode()
    started = time.perf_counter()
    assert people.identify(given) is not None
    first = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(rounds):
        people.identify(given)
    return (time.perf_counter() - started) / rounds, first


def dispatch(work: Path, rounds: int, db_override: str | None) -> dict:
    """What a worker's calls cost on a live coder rule: `rounds` jobs, each claimed, heartbeaten and finished
    (`no_changes`) by one worker, one call at a time; the median and the 90th percentile of each call's time."""
    import statistics

    print(f"\n== Dispatch: {rounds} jobs, each claimed, heartbeaten and handed back by one worker, one call at a time")
    data, url = _seeded(work / "dispatch", db_override)
    worker = ("bench-bay", "bench-bay-password-1")
    _add_account(data, url, worker, "worker")
    service, base = harness.start_service(data, url)
    people, bay = requests.Session(), requests.Session()
    people.headers.update(BASIC)
    bay.auth = worker
    times: dict[str, list[float]] = {"claim": [], "heartbeat": [], "result": []}
    try:
        people.post(f"{base}/api/v1/initiatives", json={"id": "bench-dispatch", "name": "D", "stage": "active"})
        current = people.get(f"{base}/api/v1/router/policy")
        document = current.json()["policy"]
        document["allowlist"] = sorted({*document["allowlist"], "svc:bench"})
        for rule in document["rules"]:
            rule["mode"] = "live" if rule["name"] == "coder" else rule.get("mode", "shadow")
        changed = people.put(
            f"{base}/api/v1/router/policy",
            json={"policy": document, "reason": "bench", "force": "the bench measures live dispatch"},
            headers={"If-Match": current.headers["ETag"]},
        )
        if changed.status_code != 200:
            raise RuntimeError(f"the live policy was refused: {changed.status_code} {changed.text}")
        for n in range(rounds):
            key = f"DISP-{n + 1}"
            people.post(f"{base}/api/v1/tickets", json={"key": key, "initiative_id": "bench-dispatch", "title": key})
            people.post(f"{base}/api/v1/tickets/{key}/move", json={"to": "queued"})
            moved = people.post(f"{base}/api/v1/tickets/{key}/move", json={"to": "execute"})
            if moved.status_code != 200:
                raise RuntimeError(f"{key}: {moved.status_code} {moved.text}")
        # The board's own events are routed by the jobs process: route them here, as it would, one envelope each.
        for n in range(rounds):
            key = f"DISP-{n + 1}"
            event = json.loads(EVENT.replace("{{n}}", f"dispatch-{n}"))
            event.update(source="svc", transition={"kind": "state_changed", "from": "queued", "to": "execute"})
            event["subject"] = {"type": "ticket", "id": key, "initiative_id": "bench-dispatch"}
            event["actor"] = {"kind": "human", "id": "svc:bench", "roles": []}
            event.pop("forge")
            event["dispatch_hints"] = {"eligible_for_worker": True, "blocked_reason": None, "suggested_role": "coder"}
            routed = requests.post(f"{base}/api/v1/events", json=event, headers=CI, timeout=30)
            if not routed.json()["decision"]["dispatched"]:
                raise RuntimeError(f"{key} was not dispatched: {routed.json()['decision']['gates']}")
        # The worker signs in once, as it does with its first call (the argon2id check, then remembered): a
        # heartbeat for a job that does not exist.
        warm = bay.post(f"{base}/api/v1/dispatch/jobs/0/heartbeat", json={}, timeout=30)
        if warm.status_code not in (404, 409):
            raise RuntimeError(f"the worker was refused: {warm.status_code} {warm.text}")
        claimed_ids = []
        for _ in range(rounds):
            started = time.perf_counter()
            claimed = bay.post(f"{base}/api/v1/dispatch/claim", json={"bay": "bench-bay-1"}, timeout=30)
            times["claim"].append(time.perf_counter() - started)
            if claimed.status_code != 200:
                raise RuntimeError(f"claim: {claimed.status_code} {claimed.text}")
            job = claimed.json()["job"]
            claimed_ids.append(job["id"])
            started = time.perf_counter()
            beat = bay.post(f"{base}/api/v1/dispatch/jobs/{job['id']}/heartbeat", json={}, timeout=30)
            times["heartbeat"].append(time.perf_counter() - started)
            output = {
                "schema": "svc.worker-output/v0",
                "ticket": job["ticket"]["key"],
                "role": job["role"],
                "status": "no_changes",
                "summary": "Nothing to change.",
            }
            started = time.perf_counter()
            done = bay.post(f"{base}/api/v1/dispatch/jobs/{job['id']}/result", json=output, timeout=30)
            times["result"].append(time.perf_counter() - started)
            if beat.status_code != 200 or done.status_code != 200:
                raise RuntimeError(f"heartbeat {beat.status_code}, result {done.status_code} {done.text}")
        succeeded = set()
        cursor = None
        while True:
            listed = people.get(
                f"{base}/api/v1/dispatch/jobs", params={"state": "succeeded", "limit": 100, "cursor": cursor}
            ).json()
            succeeded |= {job["id"] for job in listed["jobs"]}
            cursor = listed.get("next")
            if not cursor:
                break
    finally:
        service.stop()
    landed = len(set(claimed_ids)) == len(claimed_ids) == rounds and succeeded == set(claimed_ids)
    print(
        f"   checked: {len(claimed_ids)} claims took {len(set(claimed_ids))} distinct jobs; {len(succeeded)} jobs "
        f"recorded succeeded ({'ok' if landed else 'FAILED'})"
    )
    if not landed:
        raise RuntimeError("the dispatch benchmark's requests did not do what they claim")
    figures = {}
    for call, seconds in times.items():
        ordered = sorted(seconds)
        figures[call] = {
            "median_ms": statistics.median(ordered) * 1000,
            "p90_ms": ordered[int(len(ordered) * 0.9) - 1] * 1000,
        }
        print(f"   {call:<9} median {figures[call]['median_ms']:.2f} ms, p90 {figures[call]['p90_ms']:.2f} ms")
    return {"rounds": rounds, **figures}


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_tool": harness.load_tool(),
        "load_average": os.getloadavg(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "which",
        nargs="*",
        default=["http", "growth", "replay", "import", "backtest", "memory", "accounts", "dispatch", "history"],
    )
    parser.add_argument("--history-rounds", type=int, default=40, help="rounds of each read in the history benchmark")
    parser.add_argument("--dispatch-rounds", type=int, default=200, help="jobs the dispatch benchmark runs through")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per throughput figure")
    parser.add_argument("--sizes", default="1000,10000,100000", help="board sizes for the growth benchmark")
    parser.add_argument("--replay-lines", type=int, default=200_000)
    parser.add_argument("--import-lines", type=int, default=50_000, help="about how many envelopes import reads")
    parser.add_argument("--database", help="a postgresql:// URL (its tables are dropped!) instead of SQLite")
    args = parser.parse_args()
    info = machine()
    print(
        f"svc benchmarks — {info['date']} — {info['cpu']}, {info['cores']} cores, Python {info['python']}, "
        f"load by {info['load_tool']}"
    )
    print("load average at the start: " + ", ".join(f"{x:.2f}" for x in info["load_average"]) + " (1, 5, 15 min)")
    results: dict = {"machine": info}
    with tempfile.TemporaryDirectory(prefix="svc-bench-") as tmp:
        work = Path(tmp)
        if "http" in args.which:
            if args.database:
                reset_postgres(args.database)
            results["http"] = http_limit(work, args.seconds, args.database)
        if "growth" in args.which:
            results["growth"] = growth(work, [int(s) for s in args.sizes.split(",")], args.database)
        if "replay" in args.which:
            results["replay"] = replay(work, args.replay_lines)
        if "import" in args.which:
            results["import"] = import_history(work, args.import_lines, args.database)
        if "backtest" in args.which:
            results["backtest"] = backtest(work, results.get("replay"), args.database)
        if "memory" in args.which:
            results["memory"] = memory(work, args.database)
        if "accounts" in args.which:
            results["accounts"] = accounts(work, args.seconds, args.database)
        if "dispatch" in args.which:
            results["dispatch"] = dispatch(work, args.dispatch_rounds, args.database)
        if "history" in args.which:
            # SQLite, and PostgreSQL with --database (its own databases are made beside the one named there).
            results["history"] = flat_history.history(
                work / "history-flat",
                sizes=list(flat_history.SIZES),
                backends=["sqlite", *(["postgresql"] if args.database else [])],
                rounds=args.history_rounds,
                postgres=args.database or flat_history.POSTGRES,
            )
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    path = out / f"{info['date'].replace(':', '')}.json"
    path.write_text(json.dumps(results, indent=2))
    print(f"\nraw figures: {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
