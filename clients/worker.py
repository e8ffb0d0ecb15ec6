"""The reference worker: a machine in a bay that claims the service's dispatched jobs, runs a command on each, and
hands back what the command wrote.

    svc worker --bay NAME [--once] -- COMMAND [ARG...]
    python worker.py --bay NAME [--once] -- COMMAND [ARG...]      (the same: this file can be copied as it is)

It depends on nothing but the standard library and `requests`, and reads its own environment:

| variable                         | meaning                                                                  |
|----------------------------------|--------------------------------------------------------------------------|
| `SVC_WORKER_AUTH`                | `name:password` of an account with role `worker` (HTTP basic; required)  |
| `SVC_BASE_URL`                   | where the service is (default `http://127.0.0.1:8080`)                   |
| `SVC_WORKER_KILL_GRACE_SECONDS`  | how long a cancelled command has between SIGTERM and SIGKILL (10; tests) |

One job, step by step (CONTRACT.md, "Live dispatch, earned"), each step one line on standard error:
1. `POST /api/v1/dispatch/claim {"bay": NAME}`: 200 is a job (`{"job": {..., "envelope", "ticket"}, "lease_seconds"}`);
   204 is nothing to do: wait (1, 2, 4 ... 30 s, with jitter) and ask again, or with `--once` exit 3.
   A 204 says why in its `Svc-Idle-Reason` (paused, bay-held, fleet-full, nothing-queued), which is printed.
2. COMMAND runs (in its own process group) with the claimed `job` object as JSON on its standard input; its
   standard error passes through to ours (its last line is kept).
3. While it runs, `POST /api/v1/dispatch/jobs/{id}/heartbeat {}` every `min(lease / 3, 10 s)`, so a cancel reaches
   it within 15 s. An answer with `"cancel": true` (the job or its ticket was cancelled), or a 409 (the job is no
   longer this worker's), stops COMMAND: SIGTERM to its group, SIGKILL after the grace; no result is sent.
4. When COMMAND exits 0 having printed something, its standard output goes as it is, as the body of `POST
   /api/v1/dispatch/jobs/{id}/result`. The worker does not judge it: an output that is not JSON (422 `/bad-output`),
   or not a valid `svc.worker-output/v0` document (422), is refused by the service's output gate, which is the one
   place that decides what may reach the forge. A COMMAND that exits non-zero, or prints nothing, crashed: the worker
   sends a `failed` output for it, `"summary": "<command> exited <n>: <its last line of standard error>"`. The worker
   never writes to the forge: the service does, with its own credentials, after the gate.

Connection errors, timeouts, 429 and 5xx are tried again after a growing pause (the answer's `Retry-After` when it
has one), each pause at most 30 s; a claim or a result gives up after two minutes of them (a result sooner, when
the lease would run out first). Without `--once` the worker goes on claiming, whatever one job's fate.

Exit codes (`--once`: at most one job): 0 the result was accepted and the job succeeded; 1 it was refused (422),
the job failed (a `failed` result sent, the command's crash's included) or was cancelled, or the service could not
be reached; 2 bad arguments or credentials (401, 403: the account is not a worker); 3 nothing to claim. The password
is never printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO
from urllib.parse import urlsplit

import requests

OK, FAILED, USAGE, NOTHING = 0, 1, 2, 3

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
CLAIM_PATH = "/api/v1/dispatch/claim"
JOB_PATH = "/api/v1/dispatch/jobs/{id}"
# (connect, read) seconds for each call.
TIMEOUT = (5.0, 30.0)
KILL_GRACE = 10.0  # seconds between SIGTERM and SIGKILL for a command told to stop
FIRST_PAUSE = 1.0  # seconds before the second try (of a claim that found nothing, or of a failed call)
MAX_PAUSE = 30.0
DEADLINE = 120.0  # seconds of failed tries after which a claim or a result gives up
TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
HEARTBEAT_EVERY = 10.0  # seconds at most between two heartbeats (a third of the lease when that is shorter)
# The worker output's vocabulary, as `contracts/worker-output.json` says it (this file stands alone: a test holds
# these to the contract).
OUTPUT_SCHEMA = "svc.worker-output/v0"
OUTPUT_FAILED = "failed"
SUMMARY_MAX = 2000
IDLE_REASON = "Svc-Idle-Reason"


class WorkerError(Exception):
    """A failure that ends the worker, with the exit code it maps to."""

    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


class Unreachable(Exception):
    """A call that kept failing (no answer, 429 or 5xx) until its deadline."""


@dataclass
class Backoff:
    """Pauses that double from `first` up to `cap`, each drawn between half and all of that (jitter: workers that
    started together do not knock together)."""

    first: float = FIRST_PAUSE
    cap: float = MAX_PAUSE
    rng: Callable[[], float] = random.random
    tries: int = 0

    def pause(self, asked: float | None = None) -> float:
        """The next pause; `asked` (a `Retry-After`) replaces it, still at most `cap`."""
        ceiling = min(self.cap, self.first * 2**self.tries)
        self.tries += 1
        if asked is not None:
            return min(max(asked, 0.0), self.cap)
        return ceiling * (0.5 + 0.5 * self.rng())

    def reset(self) -> None:
        self.tries = 0


@dataclass
class Worker:
    """One worker in bay `bay`, running `command` for each job it claims from the service at `base_url`."""

    base_url: str
    name: str
    password: str
    bay: str
    command: Sequence[str]
    err: TextIO = sys.stderr
    kill_grace: float = KILL_GRACE
    # Seconds at most between two heartbeats: a third of the lease when that is shorter.
    heartbeat_every: float = HEARTBEAT_EVERY
    backoff: Callable[[], Backoff] = Backoff
    deadline: float = DEADLINE
    sleep: Callable[[float], None] = time.sleep
    session: requests.Session = field(default_factory=requests.Session)

    def __post_init__(self) -> None:
        self.idle = "nothing-queued"  # why the last claim found nothing (its Svc-Idle-Reason)
        self.base_url = self.base_url.rstrip("/")
        self.session.auth = (self.name, self.password)
        self.session.headers["User-Agent"] = "svc-worker/1"

    def log(self, message: str) -> None:
        print(f"svc worker {self.bay}: {message}", file=self.err, flush=True)

    # -- the loop -------------------------------------------------------------------------------------------

    def run(self, *, once: bool = False, max_jobs: int | None = None) -> int:
        """Claim and run jobs: with `once`, at most one (its exit code; 3 when there was none); else until
        `max_jobs` were handled (forever when None), waiting while there is nothing or the service cannot be
        reached. Refused credentials (exit 2) end it either way. Returns the last job's code."""
        idle = self.backoff()
        handled, code = 0, NOTHING
        while max_jobs is None or handled < max_jobs:
            try:
                claimed = self.claim()
            except (WorkerError, Unreachable) as exc:
                code = self._ended_by(exc)
                if once or code == USAGE:
                    return code
                self._wait(idle, "the claim failed")
                continue
            if claimed is None:
                if once:
                    self.log(f"nothing to claim ({self.idle})")
                    return NOTHING
                self._wait(idle, f"nothing to claim ({self.idle})")
                continue
            idle.reset()
            try:
                code = self.handle(*claimed)
            except (WorkerError, Unreachable) as exc:
                code = self._ended_by(exc)
                if code == USAGE:
                    return code
            handled += 1
            if once:
                return code
        return code

    def _ended_by(self, exc: WorkerError | Unreachable) -> int:
        self.log(str(exc))
        return exc.code if isinstance(exc, WorkerError) else FAILED

    def _wait(self, idle: Backoff, why: str) -> None:
        pause = idle.pause()
        self.log(f"{why}; asking again in {pause:.1f} s")
        self.sleep(pause)

    def claim(self) -> tuple[dict[str, Any], float] | None:
        """A claimed job and its lease in seconds, or None when the service has nothing for this bay now."""
        response = self.call("POST", CLAIM_PATH, "claim", json={"bay": self.bay})
        if response.status_code == 204:
            self.idle = response.headers.get(IDLE_REASON) or "nothing-queued"
            return None
        answer = _json(response)
        if response.status_code == 409:
            raise WorkerError(FAILED, f"claim refused: {_detail(answer) or 'the bay is held by another ticket'}")
        if response.status_code != 200:
            raise WorkerError(USAGE, f"claim refused: the service answered {response.status_code}{_said(answer)}")
        job = answer.get("job") if isinstance(answer, dict) else None
        lease = answer.get("lease_seconds") if isinstance(answer, dict) else None
        if not isinstance(job, dict) or "id" not in job or not isinstance(lease, int | float) or lease <= 0:
            raise WorkerError(FAILED, "claim answered 200 without a job and its lease_seconds")
        ticket = job.get("ticket") if isinstance(job.get("ticket"), dict) else {}
        self.log(
            f"claimed job {job['id']} (ticket {ticket.get('key', '?')}, role {job.get('role', '?')}), lease {lease:g} s"
        )
        return job, float(lease)

    # -- one job --------------------------------------------------------------------------------------------

    def handle(self, job: dict[str, Any], lease: float) -> int:
        """Run the command on `job`, heartbeating, and send its output: the job's exit code."""
        job_id = job["id"]
        try:
            process = subprocess.Popen(
                list(self.command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            # The lease runs out and the service puts the job back: nothing is sent for a command that never ran.
            raise WorkerError(USAGE, f"cannot run {self.command[0]!r}: {exc.strerror or type(exc).__name__}") from None
        self.log(f"job {job_id}: running {' '.join(self.command)} (pid {process.pid})")
        output = bytearray()
        said: list[str] = []  # the command's last line of standard error
        feeder = threading.Thread(target=_feed, args=(process, json.dumps(job).encode()), daemon=True)
        reader = threading.Thread(target=_drain, args=(process, output), daemon=True)
        errors = threading.Thread(target=_pass_through, args=(process, self.err, said), daemon=True)
        for thread in (feeder, reader, errors):
            thread.start()
        try:
            stop_reason = self.watch(process, job_id, min(lease / 3, self.heartbeat_every))
        except BaseException:  # refused credentials, or this worker told to stop: the command stops with it
            self.stop(process, job_id)
            raise
        if stop_reason is not None:
            self.stop(process, job_id)
            reader.join(timeout=5)
            self.log(f"job {job_id}: stopped ({stop_reason}); no result sent")
            return FAILED
        reader.join()
        errors.join(timeout=5)
        code = process.returncode
        self.log(f"job {job_id}: command exited {code}, {len(output)} bytes on its standard output")
        if code != 0 or not bytes(output).strip():
            # A crash, or a command that said nothing: the service hears so, as the job's failed output.
            return self.send_result(job_id, crashed(job, self.command, code, said[-1] if said else None), lease)
        return self.send_result(job_id, bytes(output), lease)

    def watch(self, process: subprocess.Popen, job_id: Any, interval: float) -> str | None:
        """Heartbeat every `interval` seconds while `process` runs: None when it exited by itself, else why it
        must be stopped."""
        while True:
            try:
                process.wait(timeout=interval)
                return None
            except subprocess.TimeoutExpired:
                pass
            try:
                response = self.call("POST", JOB_PATH.format(id=job_id) + "/heartbeat", "heartbeat", json={}, tries=1)
            except Unreachable as exc:
                # One missed beat is within the lease (three of them): the next one may get through.
                self.log(f"job {job_id}: heartbeat failed ({exc}); trying again at the next beat")
                continue
            answer = _json(response)
            if response.status_code == 409:
                return f"the job is no longer this worker's{_said(answer)}"
            if response.status_code != 200 or not isinstance(answer, dict):
                self.log(f"job {job_id}: heartbeat answered {response.status_code}; trying again at the next beat")
                continue
            if answer.get("cancel") is True:
                return f"cancelled: {answer.get('reason') or 'no reason given'}"
            self.log(f"job {job_id}: heartbeat, leased until {answer.get('leased_until')}")

    def stop(self, process: subprocess.Popen, job_id: Any) -> None:
        """SIGTERM to the command's process group, SIGKILL after the grace."""
        _signal_group(process, signal.SIGTERM)
        self.log(f"job {job_id}: sent SIGTERM")
        try:
            process.wait(timeout=self.kill_grace)
            return
        except subprocess.TimeoutExpired:
            pass
        _signal_group(process, signal.SIGKILL)
        self.log(f"job {job_id}: still running after {self.kill_grace:g} s: sent SIGKILL")
        process.wait()

    def send_result(self, job_id: Any, output: bytes, lease: float) -> int:
        path = JOB_PATH.format(id=job_id) + "/result"
        headers = {"Content-Type": "application/json"}
        retried: list[bool] = []
        response = self.call(
            "POST", path, "result", data=output, headers=headers, deadline=min(self.deadline, lease), retried=retried
        )
        answer = _json(response)
        status = response.status_code
        if status == 409 and retried:
            # An earlier try may have been recorded before its answer was lost: the job says what became of it.
            seen = self.call("GET", JOB_PATH.format(id=job_id), "job", tries=1)
            answer = _json(seen) if seen.status_code == 200 else answer
            status = 200 if seen.status_code == 200 and isinstance(answer, dict) else status
        if status == 200 and isinstance(answer, dict):
            state = answer.get("state")
            self.log(f"job {job_id}: result accepted, job {state}")
            return OK if state == "succeeded" else FAILED
        if status == 422:
            self.log(f"job {job_id}: result refused by the output gate{_said(answer)}")
            return FAILED
        if status in (401, 403):
            raise WorkerError(USAGE, f"result refused: {status}{_said(answer)}")
        self.log(f"job {job_id}: result answered {status}{_said(answer)}")
        return FAILED

    # -- one call -------------------------------------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        what: str,
        *,
        tries: int | None = None,
        deadline: float | None = None,
        retried: list[bool] | None = None,
        **kwargs: Any,
    ) -> requests.Response:
        """The service's answer to one call, tried again after no answer, 429 or 5xx until `deadline` seconds have
        gone (or `tries` were made). 401 and 403 end the worker (exit 2): its credentials are not a worker's."""
        pauses = self.backoff()
        started, attempt = time.monotonic(), 0
        limit = self.deadline if deadline is None else deadline
        while True:
            attempt += 1
            asked: float | None = None
            try:
                response = self.session.request(
                    method, self.base_url + path, timeout=TIMEOUT, allow_redirects=False, **kwargs
                )
            except requests.RequestException as exc:
                failure = f"no answer ({type(exc).__name__})"
            else:
                if response.status_code in (401, 403):
                    raise WorkerError(USAGE, _refused(response, what))
                if response.status_code not in TRANSIENT_STATUSES:
                    return response
                failure = f"answered {response.status_code}"
                asked = _retry_after(response.headers.get("Retry-After"))
            if retried is not None:
                retried.append(True)
            pause = pauses.pause(asked)
            if (tries is not None and attempt >= tries) or time.monotonic() - started + pause > limit:
                raise Unreachable(f"{what}: {failure} from {_shown(self.base_url)}; giving up after {attempt} tries")
            self.log(f"{what}: {failure}; trying again in {pause:.1f} s")
            self.sleep(pause)


def _feed(process: subprocess.Popen, data: bytes) -> None:
    try:
        process.stdin.write(data)
        process.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # a command that does not read its input is its own business


def _drain(process: subprocess.Popen, into: bytearray) -> None:
    for chunk in iter(lambda: process.stdout.read(65536), b""):
        into.extend(chunk)


def _pass_through(process: subprocess.Popen, err: TextIO, last: list[str]) -> None:
    """The command's standard error, line by line, to ours; its last non-blank line kept in `last`."""
    for raw in iter(process.stderr.readline, b""):
        line = raw.decode("utf-8", "replace")
        with contextlib.suppress(ValueError, OSError):  # our own stream closed: the line is kept all the same
            err.write(line if line.endswith("\n") else line + "\n")
            err.flush()
        if line.strip():
            last[:] = [line.strip()]


def crashed(job: Mapping[str, object], command: Sequence[str], code: int | None, last: str | None) -> bytes:
    """The `failed` output of a command that exited non-zero, or printed nothing: what ran, how it ended, and the
    last line it wrote to its standard error."""
    ticket = job.get("ticket")
    key = ticket.get("key") if isinstance(ticket, dict) else ticket
    words = f"{command[0]} exited {code}: {last or '(nothing on its standard error)'}"
    document: dict[str, object] = {
        "schema": OUTPUT_SCHEMA,
        "ticket": key,
        "role": job.get("role"),
        "status": OUTPUT_FAILED,
        "summary": "".join(c for c in words if c.isprintable())[:SUMMARY_MAX],
    }
    if isinstance(job.get("event_id"), str):
        document["event_id"] = job["event_id"]
    return json.dumps(document).encode()


def _signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # gone already
        os.killpg(process.pid, sig)


def _json(response: requests.Response) -> Any:
    try:
        return response.json() if response.content else None
    except ValueError:
        return None


def _detail(answer: Any) -> str:
    detail = answer.get("detail") or answer.get("title") if isinstance(answer, dict) else None
    return "".join(c for c in detail if c.isprintable())[:300] if isinstance(detail, str) else ""


def _said(answer: Any) -> str:
    """The service's problem+json in a few words: its detail and each error's path and message."""
    words = [_detail(answer)] if _detail(answer) else []
    errors = answer.get("errors") if isinstance(answer, dict) else None
    for error in errors if isinstance(errors, list) else []:
        if isinstance(error, dict):
            words.append(f"{error.get('path') or '/'}: {error.get('message')}"[:300])
    return (": " + "; ".join(words[:20])) if words else ""


def _refused(response: requests.Response, what: str) -> str:
    if response.status_code == 401:
        return f"{what} refused (401): SVC_WORKER_AUTH is not an account of the service"
    # The service says why (a claim into another bay than the worker's own, say); else the usual reason.
    said = _detail(_json(response)) if response.headers.get("Content-Type", "").endswith("json") else ""
    if said:
        return f"{what} refused (403) to the account in SVC_WORKER_AUTH: {said}"
    return f"{what} refused (403): the account in SVC_WORKER_AUTH is not a worker (svc user add NAME --role worker)"


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


# -- the command line ---------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bay", required=True, metavar="NAME", help="the bay (a slot name) this worker sits in")
    parser.add_argument(
        "--once", action="store_true", help="handle at most one job: exit 0 accepted, 1 refused or failed, 3 none"
    )
    parser.add_argument(
        "argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG...]", help="run for each job, job JSON on stdin"
    )


def run(args: argparse.Namespace, environ: Mapping[str, str], *, err: TextIO = sys.stderr) -> int:
    """`svc worker`: the worker configured by `args` and `environ`; its exit code."""
    command = list(args.argv)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("svc worker: no COMMAND (svc worker --bay NAME -- COMMAND [ARG...])", file=err)
        return USAGE
    credentials = environ.get("SVC_WORKER_AUTH", "")
    name, colon, password = credentials.partition(":")
    if not colon or not name or not password:
        print("svc worker: SVC_WORKER_AUTH is not set (name:password of an account with role worker)", file=err)
        return USAGE
    try:
        grace = float(environ.get("SVC_WORKER_KILL_GRACE_SECONDS") or KILL_GRACE)
    except ValueError:
        print("svc worker: SVC_WORKER_KILL_GRACE_SECONDS is not a number of seconds", file=err)
        return USAGE
    base_url = (environ.get("SVC_BASE_URL") or DEFAULT_BASE_URL).strip()
    if not base_url.startswith(("http://", "https://")):
        print("svc worker: SVC_BASE_URL is not an http(s) address", file=err)
        return USAGE
    worker = Worker(base_url, name, password, args.bay, command, err=err, kill_grace=grace)
    worker.log(f"working for {_shown(base_url)} as {name}, running {' '.join(command)}")
    main_thread = threading.current_thread() is threading.main_thread()
    # Told to stop (systemd, Ctrl-C), the worker stops its command first: the command runs in its own process group
    # and would otherwise outlive the worker, still holding the bay.
    before = signal.signal(signal.SIGTERM, _exit_on_signal) if main_thread else None
    try:
        return worker.run(once=args.once)
    except KeyboardInterrupt:
        worker.log("interrupted")
        return 130
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, before)


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _shown(url: str) -> str:
    """`url` without any user:password in it, to be printed."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="worker.py", description="the reference worker of svc's live dispatch")
    add_arguments(parser)
    return run(parser.parse_args(argv), os.environ)


if __name__ == "__main__":
    sys.exit(main())
