"""Instructions per request of a real server, counted by valgrind (callgrind): the figure a shared machine's
other load does not disturb.

    python bench/instructions.py [bare|floor|notify|events ...] [--requests N] [--warmup N]

Each server (`svc serve` with its defaults, the floor app or the bare app) starts under callgrind; one client
connection sends `--warmup` requests, the counters are zeroed (`callgrind_control -z`), `--requests` more are
sent one after another, and the counters dumped: every thread of the server, waitress and the group-commit
writer included, user space only (the kernel's side of the fsync and the sockets is not counted). One request
at a time means one unit per commit: a batch's shared costs are counted whole for each request, for the floor
as for the service.
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
}


def start(which: str, work: Path, out: Path) -> tuple[subprocess.Popen, str]:
    port = harness.free_port()
    base = f"http://127.0.0.1:{port}"
    grind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no"]
    if which == "bare":
        args, env = [sys.executable, str(harness.HERE / "bare_app.py"), str(port), str(harness.THREADS)], None
    elif which == "floor":
        args = [sys.executable, str(harness.HERE / "floor_app.py"), str(port), str(harness.THREADS)]
        args += [str(work / "floor.sqlite3"), str(work / "floor.log")]
        env = None
    else:
        url = f"sqlite:///{work / 'svc.sqlite3'}"
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


def count(which: str, requests: int, warmup: int, keep: Path | None = None) -> float:
    with tempfile.TemporaryDirectory(prefix="svc-instr-") as tmp:
        work = Path(tmp)
        out = work / "callgrind.out"
        proc, base = start(which, work, out)
        try:
            send(base, which, warmup, 0)
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
            send(base, which, requests, warmup)
            subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
            time.sleep(0.5)
        finally:
            proc.terminate()
            proc.wait(timeout=120)
        dumps = sorted(work.glob("callgrind.out.*"), key=lambda p: p.stat().st_mtime)
        text = dumps[-1].read_text(errors="replace") if dumps else ""
        if keep is not None and dumps:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"callgrind.{which}").write_text(text)
        totals = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if not totals:
            raise RuntimeError(f"no callgrind dump for {which}: {[p.name for p in work.iterdir()]}")
        return int(totals.group(1)) / requests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", nargs="*", default=["floor", "notify", "events"])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--keep", type=Path, help="keep each callgrind dump here (callgrind_annotate reads them)")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        print("bench/instructions.py needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    figures = {}
    for which in args.which:
        figures[which] = count(which, args.requests, args.warmup, args.keep)
        said = ""
        if which in ("notify", "events") and "floor" in figures:
            said = f"   {figures['floor'] / figures[which]:.2f} of the floor"
        print(f"{which:<8} {figures[which]:>12,.0f} instructions/request{said}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
