"""Local HTTP servers shaped like GitHub's webhook deliveries API and GitLab's project hook events API.

Each keeps, per hook, the log its sender keeps (every attempt to deliver an event, with what it got) and the
request it sent, so that asked to deliver again it POSTs the very same body and headers to the service, as the
real sender does: GitHub the signed body with its `X-GitHub-Delivery` (the guid) and `X-Hub-Signature-256`;
GitLab its body with `X-Gitlab-Token`, the same `Idempotency-Key` and `X-Gitlab-Event-UUID`.

- `FakeGitHub`: `GET /{hook}/deliveries?per_page=&cursor=` newest first, the next page's cursor in a `Link: <…>;
  rel="next"` header; records `{id, guid, delivered_at, redelivery, duplicate, duration, status, status_code,
  event, action, installation_id, repository_id, throttled_at}`; `POST /{hook}/deliveries/{id}/attempts` → 202.
  `Authorization: Bearer <token>`: none or a wrong one 401, a token without the hook's permission 403 ("Resource
  not accessible by personal access token"), an unknown hook 404, a cursor it did not make 400.
- `FakeGitLab`: `GET /api/v4/{hook}/events?status=&per_page=&page=` newest first, `X-Next-Page` (empty on the
  last page), `X-Page`, `X-Per-Page`, `X-Total`, `X-Total-Pages`; records `{id, url, trigger, request_headers
  (the token redacted), request_data, response_headers, response_body, execution_duration, response_status}`;
  `POST .../events/{id}/resend` → 201 `{"response_status": ...}`, at most five a minute per hook (then 429 with
  `Retry-After`). `PRIVATE-TOKEN`: 401, 403 and 404 as GitLab answers them.

Both can script their next answers (`answer_next`), hold every answer (`hold`, a slow sender), and put a malformed
record on a page (`malformed`).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

GITHUB_TOKEN = "ghp_test_0123456789abcdefghijklmnopqrstuvwxyz"
GITLAB_TOKEN = "glpat-test-0123456789abcdefghij"

# Where a fake delivers: given the headers and the body, the receiver's status (0: no answer).
Receiver = Callable[[dict[str, str], bytes], int]


def http_receiver(url: str, *, timeout: float = 10.0) -> Receiver:
    """A `Receiver` that POSTs to `url` over HTTP, as the sender does (no answer: status 0)."""
    import requests

    def post(headers: dict[str, str], body: bytes) -> int:
        try:
            return requests.post(url, data=body, headers=headers, timeout=timeout).status_code
        except requests.RequestException:
            return 0

    return post


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class Sent:
    """What the sender sent for one event: the same on every attempt."""

    headers: dict[str, str]
    body: bytes
    event: str
    action: str | None


@dataclass
class Hook:
    log: list[dict[str, Any]] = field(default_factory=list)  # oldest first
    sent: dict[str, Sent] = field(default_factory=dict)  # by guid / Idempotency-Key


class _FakeForge:
    """What both fakes share: the server, scripted answers, a hold, the hooks and who may read them."""

    def __init__(self, token: str, receiver: Receiver | None, *, clock: Callable[[], datetime] | None = None):
        self.token = token
        self.receiver = receiver
        self.clock = clock or (lambda: datetime.now(UTC))
        self.hooks: dict[str, Hook] = {}
        self.forbidden: set[str] = set()  # hooks the token may not read
        self.calls: list[dict[str, Any]] = []
        self.script: deque[tuple[int, dict[str, str], bytes]] = deque()
        self.malformed: dict[str, dict[str, Any] | str] = {}  # hook -> a record put first on its first page
        self.bad_cursor = False  # the next-page links carry a cursor the API itself then refuses
        self.hold = threading.Event()
        self.hold.set()
        self.ids = itertools.count(1000)
        self.lock = threading.RLock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                fake.hold.wait(timeout=30)
                status, headers, body = fake.answer(method, self.path, dict(self.headers), raw)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._answer("GET")

            def do_POST(self):
                self._answer("POST")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer_next(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode() if body is not None else b""
        self.script.append((status, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}, payload))

    def hook(self, path: str) -> Hook:
        return self.hooks.setdefault(path, Hook())

    def deliver(self, hook: str, guid: str) -> int:
        """One attempt to deliver the event `guid` of `hook` to the receiver; logged with what it got."""
        sent = self.hook(hook).sent[guid]
        status = self.receiver(dict(sent.headers), sent.body) if self.receiver is not None else 0
        self.log_attempt(hook, guid, status)
        return status

    def answer(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.calls.append({"method": method, "path": path, "headers": headers})
            if self.script:
                return self.script.popleft()
        return self.route(method, path, headers, raw)

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None):
        return status, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}, json.dumps(body).encode()

    def asked_again(self) -> list[str]:
        """The paths of every request that asked for a delivery again, in order."""
        return [c["path"] for c in self.calls if c["method"] == "POST"]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


class FakeGitHub(_FakeForge):
    def __init__(self, receiver: Receiver | None = None, *, token: str = GITHUB_TOKEN, clock=None):
        super().__init__(token, receiver, clock=clock)

    @property
    def url(self) -> str:
        return self.base

    def send(self, hook: str, event: str, action: str | None, headers: dict[str, str], body: bytes) -> int:
        """GitHub sends a new event (its headers name its guid): one attempt, logged."""
        guid = headers["X-GitHub-Delivery"]
        self.hook(hook).sent[guid] = Sent(dict(headers), body, event, action)
        return self.deliver(hook, guid)

    def log_attempt(self, hook: str, guid: str, status: int, *, redelivery: bool | None = None, at=None) -> dict:
        with self.lock:
            log = self.hook(hook).log
            sent = self.hook(hook).sent.get(guid)
            record = {
                "id": next(self.ids),
                "guid": guid,
                "delivered_at": _stamp(at or self.clock()),
                "redelivery": any(r["guid"] == guid for r in log) if redelivery is None else redelivery,
                "duplicate": False,
                "duration": 0.12,
                "status": "OK" if 200 <= status < 300 else ("Timed out" if status == 0 else "Invalid HTTP Response"),
                "status_code": status,
                "event": sent.event if sent else "pull_request",
                "action": sent.action if sent else None,
                "installation_id": None,
                "repository_id": 35129377,
                "throttled_at": None,
            }
            log.append(record)
            return record

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes):
        parts = urlsplit(path)
        if headers.get("Authorization") != f"Bearer {self.token}":
            return self._json(401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
        route = parts.path.strip("/")
        if method == "GET" and route.endswith("/deliveries"):
            return self._list(route.removesuffix("/deliveries"), parse_qs(parts.query))
        if method == "POST" and route.endswith("/attempts"):
            hook, _, rest = route.rpartition("/deliveries/")
            return self._redeliver(hook, rest.removesuffix("/attempts"))
        return self._json(404, {"message": "Not Found"})

    def _refusal(self, hook: str):
        if hook not in self.hooks:
            return self._json(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
        if hook in self.forbidden:
            return self._json(403, {"message": "Resource not accessible by personal access token"})
        return None

    def _list(self, hook: str, query: dict[str, list[str]]):
        refused = self._refusal(hook)
        if refused:
            return refused
        per_page = min(int((query.get("per_page") or ["30"])[0]), 100)
        with self.lock:
            newest_first = list(reversed(self.hook(hook).log))
        start = 0
        if "cursor" in query:
            cursor = query["cursor"][0]
            if not cursor.startswith("v1_") or not cursor[3:].isdigit():
                return self._json(400, {"message": "Bad Request", "errors": ["cursor is invalid"]})
            start = int(cursor[3:])
        page: list[Any] = newest_first[start : start + per_page]
        if start == 0 and hook in self.malformed:
            page = [self.malformed[hook], *page]
        headers = {}
        if start + per_page < len(newest_first):
            cursor = "garbled" if self.bad_cursor else f"v1_{start + per_page}"
            following = f"{self.base}/{hook}/deliveries?per_page={per_page}&cursor={cursor}"
            headers["Link"] = f'<{following}>; rel="next"'
        return self._json(200, page, headers)

    def _redeliver(self, hook: str, delivery: str):
        refused = self._refusal(hook)
        if refused:
            return refused
        with self.lock:
            record = next((r for r in self.hook(hook).log if str(r["id"]) == delivery), None)
        if record is None:
            return self._json(404, {"message": "Not Found"})
        # GitHub answers 202 and delivers soon after; here before the answer, so a test sees it when the call ends.
        self.deliver(hook, record["guid"])
        return self._json(202, {})


class FakeGitLab(_FakeForge):
    def __init__(
        self,
        receiver: Receiver | None = None,
        *,
        token: str = GITLAB_TOKEN,
        clock=None,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        super().__init__(token, receiver, clock=clock)
        self.monotonic = monotonic
        self.resends: dict[str, deque[float]] = {}

    @property
    def url(self) -> str:
        return f"{self.base}/api/v4"

    def send(self, hook: str, trigger: str, headers: dict[str, str], body: bytes) -> int:
        """GitLab sends a new event (its `Idempotency-Key` names it across attempts): one attempt, logged."""
        key = headers["Idempotency-Key"]
        self.hook(hook).sent[key] = Sent(dict(headers), body, trigger, None)
        return self.deliver(hook, key)

    def deliver(self, hook: str, guid: str) -> int:
        sent = self.hook(hook).sent[guid]
        # Every request of GitLab's carries a new X-Gitlab-Webhook-UUID; the rest, body included, is the same.
        sent.headers["X-Gitlab-Webhook-UUID"] = str(uuid.uuid4())
        return super().deliver(hook, guid)

    def log_attempt(self, hook: str, guid: str, status: int) -> dict:
        with self.lock:
            sent = self.hook(hook).sent[guid]
            shown = {k: ("[REDACTED]" if k == "X-Gitlab-Token" else v) for k, v in sent.headers.items()}
            record = {
                "id": next(self.ids),
                "url": "https://svc.example/api/v1/webhooks/forge",
                "trigger": sent.event,
                "request_headers": shown,
                "request_data": json.loads(sent.body),
                "response_headers": {},
                "response_body": "",
                "execution_duration": 0.2,
                "response_status": str(status) if status else "internal error",
            }
            self.hook(hook).log.append(record)
            return record

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes):
        parts = urlsplit(path)
        if headers.get("PRIVATE-TOKEN") != self.token:
            return self._json(401, {"message": "401 Unauthorized"})
        route = parts.path.strip("/").removeprefix("api/v4/")
        if method == "GET" and route.endswith("/events"):
            return self._list(route.removesuffix("/events"), parse_qs(parts.query))
        if method == "POST" and route.endswith("/resend"):
            hook, _, rest = route.rpartition("/events/")
            return self._resend(hook, rest.removesuffix("/resend"))
        return self._json(404, {"message": "404 Not found"})

    def _refusal(self, hook: str):
        if hook not in self.hooks:
            return self._json(404, {"message": "404 Not found"})
        if hook in self.forbidden:
            return self._json(403, {"message": "403 Forbidden"})
        return None

    def _list(self, hook: str, query: dict[str, list[str]]):
        refused = self._refusal(hook)
        if refused:
            return refused
        status = (query.get("status") or [""])[0]
        per_page = min(int((query.get("per_page") or ["20"])[0]), 100)
        page_number = int((query.get("page") or ["1"])[0])

        def wanted(record: dict[str, Any]) -> bool:
            code = record["response_status"]
            number = int(code) if code.isdigit() else 0
            if status == "server_failure":
                return number >= 500 or number == 0
            if status == "client_failure":
                return 400 <= number < 500
            if status == "successful":
                return 200 <= number < 300
            return True

        with self.lock:
            matching = [r for r in reversed(self.hook(hook).log) if wanted(r)]
        start = (page_number - 1) * per_page
        page: list[Any] = matching[start : start + per_page]
        if page_number == 1 and hook in self.malformed:
            page = [self.malformed[hook], *page]
        pages = max(1, -(-len(matching) // per_page))
        headers = {
            "X-Page": str(page_number),
            "X-Per-Page": str(per_page),
            "X-Total": str(len(matching)),
            "X-Total-Pages": str(pages),
            "X-Next-Page": str(page_number + 1) if page_number < pages else "",
        }
        return self._json(200, page, headers)

    def _resend(self, hook: str, event: str):
        refused = self._refusal(hook)
        if refused:
            return refused
        with self.lock:
            sent = self.resends.setdefault(hook, deque())
            now = self.monotonic()
            while sent and now - sent[0] >= 60:
                sent.popleft()
            if len(sent) >= 5:
                wait = max(1, int(60 - (now - sent[0])))
                message = "This endpoint has been requested too many times. Try again later."
                return self._json(429, {"message": message}, {"Retry-After": str(wait)})
            sent.append(now)
            record = next((r for r in self.hook(hook).log if str(r["id"]) == event), None)
        if record is None:
            return self._json(404, {"message": "404 Not found"})
        key = record["request_headers"].get("Idempotency-Key")
        status = self.deliver(hook, key)
        return self._json(201, {"response_status": status})
