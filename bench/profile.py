"""Where a request's time goes: `svc serve` under wrk load, sampled by py-spy, summed by function.

    python bench/profile.py [notify|events|floor] [--seconds N] [--gil] [--pin] [--top N] [--raw FILE]
        [--database URL]

py-spy (`pip install py-spy`) samples the running server from outside; it needs root or `--nonblocking`
(used here). With `--gil` only the thread holding the GIL is sampled: that is where the CPU of a Python
server bound by one interpreter goes. Each line is a share of the samples: `inclusive` counts a function
with everything it called, `self` only its own frames. The server's CPU time per request is printed too.
`floor` profiles the floor app (`floor_app.py`) the same way, for a side-by-side reading; `--pin` puts the
server's threads on core 0 and wrk on core 1, as `make bench` measures its headline figures. `--database` runs
the service on that PostgreSQL database (its tables are dropped!).
"""

from __future__ import annotations

import argparse
import collections
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
    "notify": ("/api/v1/agents/writing/notify", bench.NOTIFY),
    "events": ("/api/v1/events", bench.EVENT),
    "floor": ("/floor", bench.NOTIFY),
}


def summarize(raw: Path, top: int) -> str:
    """py-spy's collapsed stacks (`frame;frame;... count`) as inclusive and self shares by function."""
    inclusive: collections.Counter = collections.Counter()
    own: collections.Counter = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = [_short(frame) for frame in stack.split(";")]
        for frame in set(frames):
            inclusive[frame] += n
        own[frames[-1]] += n
    lines = [f"{total} samples"]
    for title, counter in (("inclusive", inclusive), ("self", own)):
        lines.append(f"-- {title}")
        lines += [f"{100 * n / max(total, 1):6.1f}%  {frame}" for frame, n in counter.most_common(top)]
    return "\n".join(lines)


def _short(frame: str) -> str:
    frame = re.sub(r" \([^()]*?site-packages/", " (", frame)
    frame = re.sub(r" \([^()]*?/lib/python3\.\d+/", " (", frame)
    return re.sub(r":\d+\)$", ")", frame)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", nargs="?", default="notify", choices=sorted(TARGETS))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--gil", action="store_true", help="sample only the thread holding the GIL")
    parser.add_argument("--pin", action="store_true", help="server on core 0, wrk on core 1")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--raw", help="also keep py-spy's collapsed stacks in this file")
    parser.add_argument("--database", help="a postgresql:// URL for the service (its tables are dropped!)")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("bench/profile.py needs py-spy: pip install py-spy", file=sys.stderr)
        return 2
    path, body = TARGETS[args.which]
    with tempfile.TemporaryDirectory(prefix="svc-profile-") as tmp:
        work = Path(tmp)
        url = args.database or f"sqlite:///{work / 'svc.sqlite3'}"
        headers = bench.CI
        if args.which == "floor":
            service, base, _ = harness.start_floor(work)
            headers = {}
        else:
            if args.database:
                bench.reset_postgres(args.database)
            seed.open_db(url)
            seed.tickets(10_000)
            service, base = harness.start_service(work, url)
        raw = Path(args.raw) if args.raw else work / "stacks.txt"
        load_cpus = None
        if args.pin and harness.cores() >= 2:
            harness.pin(service, "0")
            load_cpus = "1"
        try:
            harness.run_load(base, "POST", path, body=body, headers=headers, seconds=2)  # warm up
            command = [spy, "record", "--nonblocking", "--rate", "250", "--format", "raw", "--output", str(raw)]
            command += ["--pid", str(service.proc.pid), "--duration", str(int(args.seconds))]
            sampler = subprocess.Popen(
                [*command, *(["--gil"] if args.gil else [])], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            time.sleep(0.5)
            load = harness.run_load(
                base,
                "POST",
                path,
                body=body,
                headers=headers,
                seconds=args.seconds - 1,
                process=service,
                load_cpus=load_cpus,
            )
            sampler.wait()
        finally:
            service.stop()
        pinned = ", pinned" if load_cpus else ""
        print(f"{args.which}: {load.line()}   (py-spy{' --gil' if args.gil else ''}, {int(args.seconds)} s{pinned})")
        print(summarize(raw, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
