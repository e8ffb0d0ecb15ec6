"""Instructions per request of a real server, counted by valgrind (callgrind): the figure a shared machine's
other load does not disturb.

    python bench/instructions.py [bare|floor|ceiling-notify|ceiling-events|notify|events ...] [--requests N]
        [--warmup N] [--keep DIR] [--database URL]

Each server (`svc serve` with its defaults, the floor app, the ceiling app or the bare app) starts under
callgrind, one dump per thread; one client
connection sends `--warmup` requests, the counters are zeroed (`callgrind_control -z`), `--requests` more are
sent one after another, and the counters dumped: every thread of the server, waitress and the group-commit
writer included, user space only (the kernel's side of the fsync and the sockets is not counted). One request
at a time means one unit per commit: a batch's shared costs are counted whole for each request, for the floor
as for the service. Besides the total, each figure is split by thread: waitress's event loop (the main thread),
the request threads (waitress's tasks and the app), and the writer (the thread that spends the most in SQLite),
with what the writer spent inside SQLite's own library. `--database` runs the service (notify, events) on that
PostgreSQL database instead (its tables are dropped!): the figure is then the service's own side, psycopg and libpq
included, without the server's.
"""

from __future__ import annotations

import argparse
import http.client
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import run as bench
import seed

TARGETS = {
    "bare": ("/bare", bench.NOTIFY, {}),
    "floor": ("/floor", bench.NOTIFY, {}),
    "notify": ("/api/v1/agents/writing/notify", bench.NOTIFY, bench.CI),
    "events": ("/api/v1/events", bench.EVENT, bench.CI),
    "ceiling-notify": ("/ceiling/notify", bench.NOTIFY, bench.CI),
    "ceiling-events": ("/ceiling/events", bench.EVENT, bench.CI),
}


def start(which: str, work: Path, out: Path, database: str | None = None) -> tuple[subprocess.Popen, str]:
    port = harness.free_port()
    base = f"http://127.0.0.1:{port}"
    grind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no", "--separate-threads=yes"]
    if which == "bare":
        args, env = [sys.executable, str(harness.HERE / "bare_app.py"), str(port), str(harness.THREADS)], None
    elif which == "floor":
        args = [sys.executable, str(harness.HERE / "floor_app.py"), str(port), str(harness.THREADS)]
        args += [str(work / "floor.sqlite3"), str(work / "floor.log")]
        env = None
    elif which.startswith("ceiling"):
        url = f"sqlite:///{work / 'ceiling.sqlite3'}"
        seed.open_db(url)
        seed.tickets(1_000)
        args = [sys.executable, str(harness.HERE / "ceiling_app.py"), str(port), str(harness.THREADS)]
        args += [str(work / "ceiling.sqlite3"), str(work / "ceiling.log"), harness.CI_SECRET]
        env = None
    else:
        url = database or f"sqlite:///{work / 'svc.sqlite3'}"
        if database:
            bench.reset_postgres(database)
        seed.open_db(url)
        seed.tickets(1_000)
        args, env = [str(harness.BIN / "svc"), "serve"], harness.service_env(work, port, url)
    log = open(work / f"{which}.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen([*grind, *args], env=env, stdout=log, stderr=subprocess.STDOUT)
    harness.wait_healthy(base + ("/healthz" if which in ("notify", "events") else "/"), proc, timeout=600)
    return proc, base


def send(base: str, which: str, count: int, offset: int) -> None:
    path, body, headers = TARGETS[which]
    headers = {"Content-Type": "application/json", **headers}
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    for n in range(offset, offset + count):
        conn.request("POST", path, body=body.replace("{{n}}", f"instr-{n}"), headers=headers)
        response = conn.getresponse()
        response.read()
        if response.status not in (200, 202):
            raise RuntimeError(f"{which}: {response.status} {response.read()!r}")
    conn.close()


def count(
    which: str, requests: int, warmup: int, keep: Path | None = None, database: str | None = None
) -> dict[str, float]:
    """Instructions per request: in all, and by thread (waitress's event loop, its request threads, the writer)."""
    with tempfile.TemporaryDirectory(prefix="svc-instr-") as tmp:
        work = Path(tmp)
        out = work / "callgrind.out"
        proc, base = start(which, work, out, database)
        try:
            send(base, which, warmup, 0)
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
            send(base, which, requests, warmup)
            subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
            time.sleep(0.5)
        finally:
            proc.terminate()
            proc.wait(timeout=120)
        # One dump per thread (--separate-threads): callgrind.out.1-01 is the main thread, waitress's event loop.
        threads = sorted(work.glob("callgrind.out.1-*"))
        if not threads:
            raise RuntimeError(f"no callgrind dump for {which}: {[p.name for p in work.iterdir()]}")
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for dump in threads:
                shutil.copy(dump, keep / f"callgrind.{which}.{dump.name.rsplit('-', 1)[-1]}")
        texts = [dump.read_text(errors="replace") for dump in threads]
        # Object names are compressed across the dumps: "ob=(3) /path" once, in whichever dump came first.
        names = dict(re.findall(r"^c?ob=\((\d+)\) (.+)$", "\n".join(texts), re.M))
        costs = [_thread_cost(text, names) for text in texts]
        loop = costs[0][0]
        # The writer is the thread that spends the most inside SQLite (the request threads hand their units to it).
        # (On PostgreSQL no thread writes for the others: every request thread runs its own unit.)
        writer = max(costs[1:], key=lambda cost: cost[1]) if any(cost[1] for cost in costs) else (0, 0)
        total = sum(cost[0] for cost in costs)
        return {
            "total": total / requests,
            "event loop": loop / requests,
            "request threads": (total - loop - writer[0]) / requests,
            "writer": writer[0] / requests,
            "in SQLite": writer[1] / requests,
        }


def _thread_cost(text: str, names: dict[str, str]) -> tuple[int, int]:
    """A thread's dump: its instructions in all, and those spent in SQLite's own library (self cost by object)."""
    totals = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
    current, in_sqlite, after_call = "", 0, False
    for line in text.splitlines():
        if line.startswith("ob="):
            found = re.match(r"ob=\((\d+)\)", line)
            current = names.get(found.group(1), "") if found else line[3:]
        elif line.startswith("calls="):
            after_call = True  # the next cost line is the call's inclusive cost, not this function's own
        elif line[:1].isdigit() or line[:1] in "+-*":
            if after_call:
                after_call = False
            elif "libsqlite3" in current:
                parts = line.split()
                in_sqlite += int(parts[1]) if len(parts) > 1 else 0
    return (int(totals.group(1)) if totals else 0), in_sqlite


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", nargs="*", default=["floor", "ceiling-notify", "ceiling-events", "notify", "events"])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--keep", type=Path, help="keep each callgrind dump here (callgrind_annotate reads them)")
    parser.add_argument("--database", help="a postgresql:// URL for notify and events (its tables are dropped!)")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        print("bench/instructions.py needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    figures: dict[str, dict[str, float]] = {}
    print(f"{'':<15} {'instructions/request':>20} {'event loop':>11} {'requests':>11} {'writer':>11} {'in SQLite':>10}")
    for which in args.which:
        figures[which] = split = count(which, args.requests, args.warmup, args.keep, args.database)
        said = ""
        if which != "floor" and "floor" in figures:
            said = f"   {figures['floor']['total'] / split['total']:.2f} of the floor"
        ceiling = figures.get(f"ceiling-{which}")
        if ceiling is not None:
            said += f", {ceiling['total'] / split['total']:.2f} of its ceiling"
        print(
            f"{which:<15} {split['total']:>20,.0f} {split['event loop']:>11,.0f} {split['request threads']:>11,.0f}"
            f" {split['writer']:>11,.0f} {split['in SQLite']:>10,.0f}{said}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
