"""A local HTTP server that speaks the worker's three endpoints of the service (CONTRACT.md, "Live dispatch,
earned"), for the reference worker's tests; the real service's end-to-end test is a separate one.

- `POST /api/v1/dispatch/claim {"bay"}` → 200 `{"job": <job, with "envelope" and "ticket">, "lease_seconds"}` for
  the oldest queued job (`queue(...)` adds one), else 204 with `Svc-Idle-Reason` (`idle_reason`).
- `POST /api/v1/dispatch/jobs/{id}/heartbeat {}` → 200 `{"leased_until", "cancel", "reason"}`; `cancel(id, reason)`
  makes the next answers say `cancel: true`, `lose(id)` makes them 409 (the job is no longer this worker's).
- `POST /api/v1/dispatch/jobs/{id}/result` → 200 with the job (`succeeded`, or `failed` for an output whose status
  is `failed`), or 422 problem+json with one error per violation: the output gate, run with the contract's own
  validator plus the job's ticket and role; a body that is not a JSON object is 422 `/bad-output`. A result for a job
  not running is 409.
- `GET /api/v1/dispatch/jobs/{id}` → the job.
HTTP basic: `workers` (name → password) may call them; `others` (a viewer, say) get 403; anyone else 401.
`fail(status, times=, path=, retry_after=)` answers the next matching calls so (5xx, 429). `on_heartbeat` (a
callable given the job id and the count so far) lets a test act on the n-th beat. Everything seen is kept:
`claims`, `heartbeats` (job id, monotonic time), `results` (job id, raw body), `calls`.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from contracts.envelope import worker_output_violations

WORKER = "bay-1"
PASSWORD = "worker-pass-4f9e1c2b7a"
PROBLEM = "https://svc.invalid/problems/"


class FakeDispatch:
    def __init__(
        self,
        *,
        lease_seconds: float = 300,
        workers: dict[str, str] | None = None,
        others: dict[str, str] | None = None,
    ):
        self.lease_seconds = lease_seconds
        self.workers = {WORKER: PASSWORD} if workers is None else workers
        self.others = others or {}
        self.queued: deque[dict[str, Any]] = deque()
        self.jobs: dict[int, dict[str, Any]] = {}
        self.claims: list[dict[str, Any]] = []
        self.heartbeats: list[tuple[int, float]] = []
        self.results: list[tuple[int, bytes]] = []
        self.calls: list[dict[str, Any]] = []
        self.claimed_at: dict[int, float] = {}
        self.cancelled: dict[int, str] = {}
        self.lost: set[int] = set()
        self.failures: list[dict[str, Any]] = []
        self.on_heartbeat: Callable[[int, int], None] | None = None
        self.idle_reason = "nothing-queued"  # what a 204 to a claim says (Svc-Idle-Reason)
        self.ids = itertools.count(1)
        self.lock = threading.RLock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeDispatch:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- what a test sets up --------------------------------------------------------------------------------

    def queue(self, ticket: str = "PORT-12", role: str = "coder", **extra: Any) -> dict[str, Any]:
        """A queued job for `ticket`, shaped as the contract's `<job>` plus its envelope and ticket."""
        ident = next(self.ids)
        now = _stamp(datetime.now(UTC))
        job = {
            "id": ident,
            "decision_id": 100 + ident,
            "event_id": f"gh:delivery-{ident}",
            "ticket": {"key": ticket, "initiative_id": "portfolio", "title": "Fix the thing", "stage": "queued"},
            "role": role,
            "rule": role,
            "state": "queued",
            "bay": None,
            "attempts": 0,
            "created_at": now,
            "claimed_at": None,
            "leased_until": None,
            "finished_at": None,
            "result": None,
            "forge": {"pull_request": None, "comment": None, "error": None},
            "envelope": {
                "schema": "svc.normalized-event/v0",
                "id": f"gh:delivery-{ident}",
                "source": "tracker",
                "subject": {"type": "ticket", "id": ticket, "repo": "acme/portfolio"},
                "transition": {"kind": "state_changed", "from": "queued", "to": "execute"},
            },
            **extra,
        }
        with self.lock:
            self.queued.append(job)
            self.jobs[ident] = job
        return job

    def cancel(self, job_id: int, reason: str = "the ticket was cancelled") -> None:
        with self.lock:
            self.cancelled[job_id] = reason

    def lose(self, job_id: int) -> None:
        with self.lock:
            self.lost.add(job_id)

    def fail(self, status: int, *, times: int = 1, path: str = "", retry_after: float | None = None) -> None:
        """Answer the next `times` calls whose path contains `path` with `status` (problem+json)."""
        with self.lock:
            self.failures.append({"status": status, "times": times, "path": path, "retry_after": retry_after})

    # -- the endpoints --------------------------------------------------------------------------------------

    def answer(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], Any]:
        with self.lock:
            self.calls.append({"method": method, "path": path, "headers": headers, "body": raw})
            for failure in self.failures:
                if failure["path"] in path:
                    failure["times"] -= 1
                    if failure["times"] <= 0:
                        self.failures.remove(failure)
                    extra = {"Retry-After": f"{failure['retry_after']:g}"} if failure["retry_after"] is not None else {}
                    return failure["status"], extra, _problem(failure["status"], "scripted failure")
        who = self._who(headers.get("Authorization", ""))
        if who is None:
            return 401, {"WWW-Authenticate": 'Basic realm="svc"'}, _problem(401, "credentials required")
        if who not in self.workers:
            return 403, {}, _problem(403, "only a worker may call the dispatch endpoints")
        if method == "POST" and path == "/api/v1/dispatch/claim":
            return self._claim(who, _parsed(raw))
        found = re.fullmatch(r"/api/v1/dispatch/jobs/([0-9]+)(/heartbeat|/result)?", path)
        job = self.jobs.get(int(found.group(1))) if found else None
        if job is None:
            return 404, {}, _problem(404, "no such job")
        if method == "GET" and found.group(2) is None:
            return 200, {}, job
        if method == "POST" and found.group(2) == "/heartbeat":
            return self._heartbeat(job)
        if method == "POST" and found.group(2) == "/result":
            return self._result(job, raw)
        return 405, {}, _problem(405, "method not allowed")

    def _who(self, authorization: str) -> str | None:
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            name, _, password = base64.b64decode(encoded).decode().partition(":")
        except ValueError:
            return None
        known = {**self.workers, **self.others}
        return name if name in known and known[name] == password else None

    def _claim(self, who: str, body: Any):
        with self.lock:
            self.claims.append({"worker": who, "body": body})
            if not isinstance(body, dict) or not isinstance(body.get("bay"), str):
                return 422, {}, _problem(422, "bay is required")
            if not self.queued:
                return 204, {"Svc-Idle-Reason": self.idle_reason}, None
            job = self.queued.popleft()
            now = datetime.now(UTC)
            job.update(
                state="running",
                bay=body["bay"],
                claimed_at=_stamp(now),
                leased_until=_stamp(now + timedelta(seconds=self.lease_seconds)),
            )
            job["ticket"]["stage"], job["ticket"]["assigned_slot"] = "execute", body["bay"]
            self.claimed_at[job["id"]] = time.monotonic()
            return 200, {}, {"job": job, "lease_seconds": self.lease_seconds}

    def _heartbeat(self, job: dict[str, Any]):
        with self.lock:
            if job["id"] in self.lost or (job["state"] != "running" and job["id"] not in self.cancelled):
                return 409, {}, _problem(409, "this job is not held by this worker")
            self.heartbeats.append((job["id"], time.monotonic()))
            count = sum(1 for ident, _ in self.heartbeats if ident == job["id"])
            reason = self.cancelled.get(job["id"])
            if reason is not None:
                job["state"] = "cancelled"
            job["leased_until"] = _stamp(datetime.now(UTC) + timedelta(seconds=self.lease_seconds))
            answer = {"leased_until": job["leased_until"], "cancel": reason is not None, "reason": reason}
        if self.on_heartbeat is not None:
            self.on_heartbeat(job["id"], count)
        return 200, {}, answer

    def _result(self, job: dict[str, Any], raw: bytes):
        with self.lock:
            self.results.append((job["id"], raw))
            if job["state"] != "running" or job["id"] in self.lost:
                return 409, {}, _problem(409, "this job is no longer running")
            output = _parsed(raw)
            if not isinstance(output, dict):  # not JSON, empty, an array: the service's /bad-output
                job["state"], job["finished_at"] = "failed", _stamp(datetime.now(UTC))
                body = _problem(422, "the result is not a JSON object")
                body["type"] = "https://svc.invalid/problems/bad-output"
                return 422, {}, body
            errors = [{"path": v.path, "message": v.message} for v in worker_output_violations(output)]
            if isinstance(output, dict) and not errors:
                if output.get("ticket") != job["ticket"]["key"]:
                    errors.append({"path": "/ticket", "message": "names another ticket than the job's"})
                if output.get("role") != job["role"]:
                    errors.append({"path": "/role", "message": "names another role than the job's"})
                if not str(output.get("branch", "svc/")).startswith("svc/"):
                    errors.append({"path": "/branch", "message": "does not start with svc/"})
            job["finished_at"] = _stamp(datetime.now(UTC))
            if errors:
                job["state"] = "failed"
                return 422, {}, _problem(422, "the worker's output was refused", errors=errors)
            job["state"] = "failed" if output["status"] == "failed" else "succeeded"
            job["result"] = output
            return 200, {}, job

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, body = fake.answer(self.command, self.path, dict(self.headers), raw)
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                if data:
                    kind = "application/problem+json" if status >= 400 else "application/json"
                    self.send_header("Content-Type", kind)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

        return Handler


def _problem(status: int, detail: str, *, errors: list[dict[str, str]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": f"{PROBLEM}{status}", "title": str(status), "status": status, "detail": detail}
    if errors:
        body["errors"] = errors
    return body


def _parsed(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        return None


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
