"""Processes and load for the benchmarks: the service, the bare app, and the load generator (wrk when installed,
else a Python client), with the figures each run reports."""

from __future__ import annotations

import http.client
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
from dataclasses import asdict, dataclass
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

    def line(self) -> str:
        return f"{self.rps:8.0f} req/s   p50 {self.p50_ms:7.2f} ms   p99 {self.p99_ms:7.2f} ms   errors {self.errors}"


def load_tool() -> str:
    return "wrk" if shutil.which("wrk") else "python"


WRK_SCRIPT = """
local counter = 0
local tid = 0
local method, path, body, headers = %(method)s, %(path)s, %(body)s, %(headers)s
function setup(thread) tid = tid + 1; thread:set("tid", tid) end
function request()
  counter = counter + 1
  local b = body
  if b ~= nil then b = string.gsub(b, "{{n}}", tid .. "-" .. counter) end
  return wrk.format(method, path, headers, b)
end
function done(summary, latency, requests)
  io.write(string.format("BENCH %%d %%f %%f %%f %%d\\n", summary.requests, summary.duration / 1e6,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write
      + summary.errors.timeout))
end
"""


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
    per_thread_limit: int = 0,
) -> Load:
    """Drive `method path` for `seconds` (or until each of wrk's two threads sent `per_thread_limit`);
    `{{n}}` in the body becomes a unique number per request."""
    headers = dict(headers or {})
    if body is not None:
        headers.setdefault("Content-Type", "application/json")
    if load_tool() == "wrk":
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
            script.write(
                WRK_SCRIPT
                % {
                    "method": _lua(method),
                    "path": _lua(path),
                    "body": _lua(body),
                    "headers": _lua(headers),
                    "limit": per_thread_limit,
                }
            )
        done = subprocess.run(
            ["wrk", "-t2", f"-c{connections}", f"-d{int(seconds)}s", "--timeout", "10s", "-s", script.name, base],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"wrk failed: {done.stderr or done.stdout}")
        out = done.stdout
        os.unlink(script.name)
        line = next(line for line in out.splitlines() if line.startswith("BENCH "))
        count, duration, p50, p99, errors = line.split()[1:]
        # errors.status counts answers of 400 and above; the rest are socket errors and timeouts
        return Load(
            "wrk", int(count), float(duration), int(count) / float(duration), float(p50), float(p99), int(errors)
        )
    return _python_load(base, method, path, body, headers, seconds, connections)


def _python_load(base, method, path, body, headers, seconds, connections) -> Load:
    host, port = base.removeprefix("http://").split(":")
    latencies: list[float] = []
    errors = [0]
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def worker(n: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        i = 0
        mine: list[float] = []
        while time.monotonic() < stop:
            i += 1
            payload = body.replace("{{n}}", f"{n}-{i}") if body else None
            started = time.perf_counter()
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            response.read()
            mine.append(time.perf_counter() - started)
            if response.status >= 300:
                with lock:
                    errors[0] += 1
        with lock:
            latencies.extend(mine)

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    latencies.sort()
    q = statistics.quantiles(latencies, n=100)
    return Load("python", len(latencies), elapsed, len(latencies) / elapsed, q[49] * 1000, q[98] * 1000, errors[0])


def latency_figures(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    q = statistics.quantiles(ordered, n=100)
    return {"p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000, "count": len(ordered)}


def as_dict(load: Load) -> dict:
    return asdict(load)
