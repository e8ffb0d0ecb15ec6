"""Starting real `svc` processes for end-to-end tests, on free ports, and waiting for them properly."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests

from conftest import CHEAP_PASSWORD_HASHING

SVC = str(Path(sys.executable).with_name("svc"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def svc_env(**values: str) -> dict[str, str]:
    """The environment of an `svc` process a test starts: none of the test process's own settings, the suite's cheap
    password hashing (a test may set its own), then `values`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SVC_", "DISCORD_", "OPS_"))}
    env.pop("DATABASE_URL", None)
    env.update(CHEAP_PASSWORD_HASHING)
    env.update(values)
    return env


def last_due(cron: str) -> datetime:
    """The most recent due time of `cron` (UTC) before now: a moment computed from the clock, never a literal."""
    from domain.ops.schedules import Cron

    return Cron(cron).previous(datetime.now(UTC))


def rehearsal_offset(due: datetime, *, after: float = 3.0) -> str:
    """SVC_JOBS_CLOCK_OFFSET that reads the schedules `after` seconds past `due` (a past due time: a rehearsal)."""
    return f"{(due + timedelta(seconds=after) - datetime.now(UTC)).total_seconds():.3f}"


def wait_until(predicate, *, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class ServiceProcess:
    """`svc <command>` as a child process; stopped (and its output kept) at the end."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path):
        self.args = args
        self.env = env
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> ServiceProcess:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen([SVC, *self.args], env=self.env, stdout=self._log, stderr=subprocess.STDOUT)
        return self

    def wait_healthy(self, base_url: str, timeout: float = 30.0) -> None:
        def healthy():
            if self.proc.poll() is not None:
                raise AssertionError(f"svc exited with {self.proc.returncode}:\n{self.output()}")
            try:
                return requests.get(base_url + "/healthz", timeout=1).status_code == 200
            except requests.RequestException:
                return False

        wait_until(healthy, timeout=timeout, what=f"{base_url}/healthz")

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig=None) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            if sig is None:
                self.proc.terminate()
            else:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def start_service(tmp_path: Path, database_url: str, **env: str) -> tuple[ServiceProcess, str]:
    """`svc serve` on a free port with the given environment, healthy; returns (process, base URL)."""
    port = free_port()
    values = {"SVC_DATA_DIR": str(tmp_path / "data"), "SVC_PORT": str(port), "DATABASE_URL": database_url, **env}
    server = ServiceProcess(["serve"], svc_env(**values), tmp_path / f"serve-{port}.log").start()
    base = f"http://127.0.0.1:{port}"
    try:
        server.wait_healthy(base)
    except BaseException:
        server.stop()
        raise
    return server, base


def svc_user(tmp_path: Path, database_url: str, *args: str, password: str | None = None, **env: str):
    """`svc user ARGS...` as a person's script runs it: the password piped on standard input, never an argument."""
    values = {"SVC_DATA_DIR": str(tmp_path / "data"), "DATABASE_URL": database_url, **env}
    return subprocess.run(
        [SVC, "user", *args],
        input=None if password is None else password + "\n",
        stdin=subprocess.DEVNULL if password is None else None,
        env=svc_env(**values),
        capture_output=True,
        text=True,
        timeout=60,
    )
