"""A database outage, as real processes live through it: SQLite's disk refusing writes, PostgreSQL stopped. The
API answers 503 with `Retry-After` (never 500), each process logs the first cause once, the jobs process says when
the database went and when it came back, and the notify hook rides the outage out (held 15 s past the hook's first
503, longer than a hook without an overall deadline would wait): its report is recorded once."""

from __future__ import annotations

import json
import resource
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from processes import SVC, free_port, svc_env, wait_until
from servers.tcp_relay import TcpRelay

pytestmark = [pytest.mark.process, pytest.mark.both_backends]

SECRET = "outage-ci-secret-0123456789abcdef"
BASIC = ("ops", "outage-basic-password-0123")
# How long the outage lasts past the hook's first 503: longer than a hook without an overall deadline kept trying
# (1 + 2 + 4 s of pauses, some 10 s in all), so only one that waits as Retry-After says is still there at the end.
HOLD_SECONDS = 15.0


class PipedProcess:
    """`svc <command>` with its output read through a pipe: a file-size limit on the process (the SQLite outage
    below) must not stop its log lines reaching the test."""

    def __init__(self, args: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen([SVC, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def logged(self, logger: str, starts: str = "") -> list[dict]:
        found = []
        for line in list(self.lines):
            if line.startswith("{"):
                record = json.loads(line)
                if record.get("logger") == logger and record.get("message", "").startswith(starts):
                    found.append(record)
        return found

    def output(self) -> str:
        return "\n".join(self.lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Outage:
    """Makes the database unusable for the given processes, and usable again. SQLite: a file-size limit on the
    processes, so every write fails as on a full disk (`disk I/O error` or `database or disk is full`) while
    reads go on. PostgreSQL: the processes reach it through a relay that is cut, as if the server stopped."""

    def __init__(self, database_url: str):
        self.sqlite = database_url.startswith("sqlite")
        self.relay = None
        self.url = database_url
        self.pids: list[int] = []
        if not self.sqlite:
            self.relay, self.url = TcpRelay.in_front_of(database_url)

    def begin(self) -> None:
        if self.relay is not None:
            self.relay.cut()
            return
        for pid in self.pids:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))

    def end(self) -> None:
        if self.relay is not None:
            self.relay.restore()
            return
        for pid in self.pids:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    def close(self) -> None:
        if self.relay is not None:
            self.relay.close()


def test_an_outage_answers_503_and_the_hook_rides_it_out_recorded_once(tmp_path, database_url):
    outage = Outage(database_url)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = svc_env(
        SVC_DATA_DIR=str(tmp_path / "data"),
        SVC_PORT=str(port),
        DATABASE_URL=outage.url,
        SVC_CI_WEBHOOK_SECRET=SECRET,
        SVC_BASIC_AUTH=":".join(BASIC),
        SVC_OPS_SCHEDULER="external",  # nothing scheduled runs here, whatever the time of day
    )
    server = PipedProcess(["serve"], env)
    jobs = PipedProcess(["jobs"], env)
    hook = None
    try:
        _started(server, lambda: _answers(base + "/healthz"), "the server")
        # Its heartbeat beats from the start: the outage will be seen by it, and so will the way back.
        _started(jobs, lambda: jobs.logged("svc.jobs", "jobs process started"), "the jobs process")
        outage.pids = [server.proc.pid, jobs.proc.pid]
        ci = {"X-Svc-CI-Secret": SECRET}
        notify = base + "/api/v1/agents/writing/notify"
        assert requests.post(notify, json={"status": "FAIL_QA"}, headers=ci, timeout=10).status_code == 200

        outage.begin()
        refused = requests.post(
            notify, json={"status": "SUCCESS"}, headers={**ci, "Idempotency-Key": "refused-1"}, timeout=30
        )
        assert refused.status_code == 503, refused.text
        assert refused.headers["Content-Type"] == "application/problem+json"
        assert refused.json()["type"].endswith("/database-unavailable")
        assert int(refused.headers["Retry-After"]) >= 1
        again = requests.post(notify, json={"status": "SUCCESS"}, headers=ci, timeout=30)
        assert again.status_code == 503  # and the log says so once, below
        # Health takes this process out: SQLite's disk refuses writes; PostgreSQL cannot be reached.
        health = requests.get(base + "/healthz", timeout=10)
        assert (health.status_code, health.json()["status"]) == (503, "failing")
        failing = health.json()["checks"]["disk" if outage.sqlite else "database"]
        assert failing["ok"] is False, health.json()
        assert ("writes fail: SQLite: " if outage.sqlite else "unreachable") in failing["detail"]

        hook_log = tmp_path / "hook.log"
        with open(hook_log, "wb") as out:
            hook = subprocess.Popen(
                [SVC, "notify", "SUCCESS", "--idempotency-key", "ci-run-42"],
                env=svc_env(SVC_CI_WEBHOOK_SECRET=SECRET, SVC_BASE_URL=base),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        # The hook has been answered 503 and is waiting as told; the jobs process has seen the outage too.
        wait_until(lambda: "503" in hook_log.read_text(), timeout=30, what="the hook's first 503")
        hold_until = time.monotonic() + HOLD_SECONDS
        wait_until(lambda: jobs.logged("svc.database", "database unavailable"), timeout=30, what="the jobs' line")
        _hold(hook, hold_until, hook_log)
        outage.end()
        assert hook.wait(timeout=120) == 0, hook_log.read_text()
        wait_until(lambda: jobs.logged("svc.database", "database available again"), timeout=30, what="jobs back")

        runs = requests.get(base + "/api/v1/agents/runs?agent_id=writing-daily", headers=ci, timeout=10).json()
        timeline = requests.get(base + "/api/v1/tickets/WRITING-DAILY/timeline", auth=BASIC, timeout=10).json()
    finally:
        if hook is not None and hook.poll() is None:
            hook.kill()
        outage.end()
        server.stop()
        jobs.stop()
        outage.close()

    # The report sent into the outage is recorded once; the refused ones not at all.
    assert [r["status"] for r in runs["runs"]] == ["SUCCESS", "FAIL_QA"]
    assert len(timeline["entries"]) == 2
    assert "recorded on WRITING-DAILY" in hook_log.read_text()
    # Each process named the first cause once, and the jobs process said when the database came back.
    for process in (server, jobs):
        (went,) = process.logged("svc.database", "database unavailable")
        assert went["level"] == "error"
        assert went["cause"].startswith("SQLite: " if outage.sqlite else "PostgreSQL: ")
        assert "cannot rollback" not in went["cause"]
    (back,) = jobs.logged("svc.database", "database available again")
    assert back["failures"] >= 1
    assert not jobs.logged("svc.jobs", "jobs step failed")  # no traceback per worker step
    assert not server.logged("svc.api", "unhandled error")  # no 500


def _started(process: PipedProcess, ready, what: str) -> None:
    def up():
        if process.proc.poll() is not None:
            raise AssertionError(f"{what} exited with {process.proc.returncode}:\n{process.output()[-3000:]}")
        return ready()

    try:
        wait_until(up, timeout=60, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{process.output()[-3000:]}") from None


def _hold(hook: subprocess.Popen, until: float, hook_log: Path) -> None:
    """Keep the outage on until `until` (a monotonic time), the hook trying all along: one that gives up is a
    report lost."""
    while (left := until - time.monotonic()) > 0:
        if hook.poll() is not None:
            said = hook_log.read_text()
            raise AssertionError(f"the hook gave up inside the outage (exit {hook.returncode}):\n{said}")
        time.sleep(min(left, 0.2))


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False
