"""Processes and load for the benchmarks: the service, the bare app, and the load generator (wrk when installed,
else a Python client), with the figures each run reports."""

from __future__ import annotations

import http.client
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
CI_SECRET = "bench-ci-secret-0123456789abcdef"
BASIC = ("bench", "bench-password-123")
THREADS = 8  # the service's default SVC_THREADS; the bare app gets the same


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        try:
            if requests.get(url, timeout=1).status_code < 500:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


class Process:
    def __init__(self, args: list[str], env: dict[str, str], health: str, log: Path):
        self.log = open(log, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(args, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_healthy(health, self.proc)

    def check_alive(self) -> None:
        """Raise, with the end of its log, if the process has exited."""
        if self.proc.poll() is not None:
            self.log.flush()
            tail = Path(self.log.name).read_text(errors="replace").splitlines()[-20:]
            said = "\n".join(tail)
            raise RuntimeError(f"{self.proc.args} exited with {self.proc.returncode}; its log ends:\n{said}")

    def cpu_seconds(self) -> float:
        """User and system CPU time the process has used so far (every thread of it)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def service_env(data_dir: Path, port: int, database_url: str | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SVC_", "DISCORD_", "OPS_"))}
    env.pop("DATABASE_URL", None)
    env.update(
        SVC_DATA_DIR=str(data_dir),
        SVC_PORT=str(port),
        SVC_THREADS=str(THREADS),
        SVC_CI_WEBHOOK_SECRET=CI_SECRET,
        SVC_BASIC_AUTH=":".join(BASIC),
        **extra,
    )
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def start_service(data_dir: Path, database_url: str | None = None, **extra: str) -> tuple[Process, str]:
    """`svc serve` with its default settings (INFO logs, to a file) on the given data."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = service_env(data_dir, port, database_url, **extra)
    return Process([str(BIN / "svc"), "serve"], env, base + "/healthz", data_dir / "serve.log"), base


def start_floor(work: Path) -> tuple[Process, str, Path]:
    """The floor app (`floor_app.py`) on a database of its own; its base URL and that database's path."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    database = work / "floor.sqlite3"
    args = [sys.executable, str(HERE / "floor_app.py"), str(port), str(THREADS), str(database), str(work / "floor.log")]
    return Process(args, os.environ.copy(), base + "/", work / "floor-out.log"), base, database


def start_ceiling(work: Path, database: Path) -> tuple[Process, str]:
    """The ceiling app (`ceiling_app.py`) on `database`, a copy of the service's seeded one; its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [sys.executable, str(HERE / "ceiling_app.py"), str(port), str(THREADS), str(database)]
    args += [str(work / "ceiling.log"), CI_SECRET]
    return Process(args, os.environ.copy(), base + "/", work / "ceiling-out.log"), base


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0))


def pin(process: Process, cpus: str | None) -> None:
    """Put every thread of `process` on `cpus` (e.g. "0"), or back on all the cores with None (taskset -a)."""
    every = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    subprocess.run(
        ["taskset", "-a", "-p", "-c", cpus or every, str(process.proc.pid)], check=True, stdout=subprocess.DEVNULL
    )


def start_bare(log_dir: Path) -> tuple[Process, str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [sys.executable, str(HERE / "bare_app.py"), str(port), str(THREADS)]
    return Process(args, os.environ.copy(), base + "/", log_dir / "bare.log"), base


@dataclass
class Load:
    tool: str
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    # answers by HTTP status, e.g. {202: 9000}; socket errors and timeouts are in `errors` only
    statuses: dict[int, int] = field(default_factory=dict)
    # CPU the server process used per answered request, when the process was given (ms)
    cpu_ms: float | None = None
    # the prefix `{{n}}` became in this run's bodies: `<run>-<thread>-<counter>`
    tag: str = ""

    def line(self) -> str:
        cpu = f"   cpu {self.cpu_ms:5.2f} ms/req" if self.cpu_ms is not None else ""
        return (
            f"{self.rps:8.0f} req/s   p50 {self.p50_ms:7.2f} ms   p99 {self.p99_ms:7.2f} ms   errors {self.errors}{cpu}"
        )

    def answered(self, *statuses: int) -> int:
        return sum(self.statuses.get(s, 0) for s in statuses)


def load_tool() -> str:
    return "wrk" if shutil.which("wrk") else "python"


# Each wrk thread runs this script in a Lua state of its own. `setup` runs in the main state and hands each thread
# its number with `thread:set`, which sets a *global* of that thread's state: `request` must read the global
# (a `local tid` here would shadow it, and every thread would send the same ids). Each thread counts the answers
# by status; `done` (main state again) collects them with `thread:get`.
WRK_SCRIPT = """
local threads = {}
local method, path, body, headers, tag = %(method)s, %(path)s, %(body)s, %(headers)s, %(tag)s
local counter = 0
function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end
function init(args)
  statuses = {}
end
function request()
  counter = counter + 1
  local b = body
  if b ~= nil then b = string.gsub(b, "{{n}}", tag .. "-" .. tid .. "-" .. counter) end
  return wrk.format(method, path, headers, b)
end
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end
function done(summary, latency, requests)
  io.write(string.format("BENCH %%d %%f %%f %%f %%d\\n", summary.requests, summary.duration / 1e6,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("statuses")) do
      io.write(string.format("STATUS %%d %%d\\n", status, count))
    end
  end
end
"""
# Each run's bodies get their own prefix, so two runs against one database never send the same id.
_runs = itertools.count(1)


def _lua(value) -> str:
    if value is None:
        return "nil"
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{_lua(k)}]={_lua(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)  # a JSON string is a valid Lua string literal for our ASCII bodies


def run_load(
    base: str,
    method: str,
    path: str,
    *,
    body: str | None = None,
    headers: dict | None = None,
    seconds: float = 10,
    connections: int = 16,
    process: Process | None = None,
    load_cpus: str | None = None,
) -> Load:
    """Drive `method path` for `seconds`; `{{n}}` in the body becomes a unique `<run>-<thread>-<counter>` per
    request (`Load.tag` is `<run>`). With `process`, the server's CPU time per answered request is measured too.
    With `load_cpus` (e.g. "1"), wrk runs on those cores only (`taskset -c`).

    `errors` counts socket errors and timeouts; the answers, whatever their status, are in `statuses`."""
    headers = dict(headers or {})
    if body is not None:
        headers.setdefault("Content-Type", "application/json")
    tag = f"r{os.getpid()}x{next(_runs)}"
    cpu_before = process.cpu_seconds() if process is not None else 0.0
    if load_tool() == "wrk":
        load = _wrk_load(base, method, path, body, headers, seconds, connections, tag, load_cpus)
    else:
        load = _python_load(base, method, path, body, headers, seconds, connections, tag)
    if process is not None:
        load.cpu_ms = (process.cpu_seconds() - cpu_before) / max(load.requests, 1) * 1000
    load.tag = tag
    return load


def _wrk_load(base, method, path, body, headers, seconds, connections, tag, cpus=None) -> Load:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(
            WRK_SCRIPT
            % {
                "method": _lua(method),
                "path": _lua(path),
                "body": _lua(body),
                "headers": _lua(headers),
                "tag": _lua(tag),
            }
        )
    try:
        done = subprocess.run(
            [
                *(["taskset", "-c", cpus] if cpus else []),
                "wrk",
                "-t2",
                f"-c{connections}",
                f"-d{int(seconds)}s",
                "--timeout",
                "10s",
                "-s",
                script.name,
                base,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        os.unlink(script.name)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed: {done.stderr or done.stdout}")
    lines = done.stdout.splitlines()
    line = next(line for line in lines if line.startswith("BENCH "))
    count, duration, p50, p99, errors = line.split()[1:]
    statuses: dict[int, int] = {}
    for status_line in (line for line in lines if line.startswith("STATUS ")):
        status, n = map(int, status_line.split()[1:])
        statuses[status] = statuses.get(status, 0) + n
    return Load(
        "wrk", int(count), float(duration), int(count) / float(duration), float(p50), float(p99), int(errors), statuses
    )


def _python_load(base, method, path, body, headers, seconds, connections, tag) -> Load:
    host, port = base.removeprefix("http://").split(":")
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    errors = [0]
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def worker(n: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        i = 0
        mine: list[float] = []
        seen: dict[int, int] = {}
        while time.monotonic() < stop:
            i += 1
            payload = body.replace("{{n}}", f"{tag}-{n}-{i}") if body else None
            started = time.perf_counter()
            try:
                conn.request(method, path, body=payload, headers=headers)
                response = conn.getresponse()
                response.read()
            except OSError:
                with lock:
                    errors[0] += 1
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
                continue
            mine.append(time.perf_counter() - started)
            seen[response.status] = seen.get(response.status, 0) + 1
        with lock:
            latencies.extend(mine)
            for status, count in seen.items():
                statuses[status] = statuses.get(status, 0) + count

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    latencies.sort()
    q = statistics.quantiles(latencies, n=100)
    return Load(
        "python", len(latencies), elapsed, len(latencies) / elapsed, q[49] * 1000, q[98] * 1000, errors[0], statuses
    )


def latency_figures(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    q = statistics.quantiles(ordered, n=100)
    return {"p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000, "count": len(ordered)}


def as_dict(load: Load) -> dict:
    return asdict(load)
