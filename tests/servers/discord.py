"""A local server shaped like Discord's Execute Webhook endpoint, `POST /api/webhooks/{id}/{token}`.

What it does, as Discord does:
- 200 with the created message when the query has `wait=true`, else 204 with no body;
- 404 `{"message": "Unknown Webhook", "code": 10015}` for an unknown webhook id or token;
- 400 `{"message": "Invalid Form Body", "code": 50035, ...}` for empty or over-long content;
- rate limits: a bucket of `bucket_limit` requests per `bucket_seconds`, announced on every answer with
  `X-RateLimit-Limit`, `-Remaining`, `-Reset`, `-Reset-After` and `-Bucket`, and 30 messages a minute per
  webhook, which no header announces; past either, 429 with `{"message", "retry_after", "global"}`,
  `Retry-After` and `X-RateLimit-Scope`.
Its clock can be the test's `FakeClock`, so windows move when the test says.

A test can script the next answers (`answer_next`): any status with a body and headers, or a slow answer.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class FakeDiscord:
    def __init__(
        self,
        *,
        clock: Callable[[], datetime] | None = None,
        webhook_id: str = "112233445566778899",
        token: str = "Xy9-secret-webhook-token-do-not-log_0123456789abcdef",  # noqa: S107 (a test token)
        bucket_limit: int = 5,
        bucket_seconds: float = 2.0,
        per_minute: int = 30,
        port: int = 0,
    ):
        self.clock = clock or (lambda: datetime.now(UTC))
        self.webhook_id = webhook_id
        self.token = token
        self.bucket_limit = bucket_limit
        self.bucket_seconds = bucket_seconds
        self.per_minute = per_minute
        self.messages: list[dict] = []  # what the channel shows
        self.requests: list[dict] = []  # every request that reached the webhook path
        self.rate_limited = 0  # 429s the server had to send on its own
        self._script: deque[dict] = deque()
        self._bucket: deque[datetime] = deque()
        self._minute: deque[datetime] = deque()
        self._lock = threading.Lock()
        self._next_id = 1_300_000_000_000_000_000
        # A fixed `port` lets a test point the service at the address before anything listens there.
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> FakeDiscord:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeDiscord:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"{self.base}/api/webhooks/{self.webhook_id}/{self.token}"

    # -- scripting ------------------------------------------------------------------------------------------

    def answer_next(
        self,
        status: int | None = None,
        *,
        body: dict | str | None = None,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        times: int = 1,
    ) -> None:
        """Script the next `times` answers: `status` (None: answer normally, after `delay` seconds)."""
        for _ in range(times):
            self._script.append({"status": status, "body": body, "headers": headers or {}, "delay": delay})

    def answer_normally(self) -> None:
        """Drop the scripted answers not yet given: from now on, answer as Discord does."""
        with self._lock:
            self._script.clear()

    def contents(self) -> list[str]:
        with self._lock:
            return [m["content"] for m in self.messages]

    # -- the endpoint ---------------------------------------------------------------------------------------

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                segments = [s for s in parts.path.split("/") if s]
                if segments[:2] != ["api", "webhooks"] or segments[2:] != [fake.webhook_id, fake.token]:
                    return self._send(404, {"message": "Unknown Webhook", "code": 10015})
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._send(400, {"message": "Cannot send an empty message", "code": 50006})
                with fake._lock:
                    fake.requests.append({"query": query, "body": body, "headers": dict(self.headers)})
                    scripted = fake._script.popleft() if fake._script else None
                if scripted is not None:
                    if scripted["delay"]:
                        time.sleep(scripted["delay"])
                    if scripted["status"] is not None:
                        return self._send(scripted["status"], scripted["body"], scripted["headers"])
                self._execute(body, wait=query.get("wait") == ["true"])

            def _execute(self, body: dict, *, wait: bool) -> None:
                content = body.get("content") if isinstance(body, dict) else None
                if not isinstance(content, str) or not content.strip() or len(content) > 2000:
                    return self._send(
                        400,
                        {
                            "message": "Invalid Form Body",
                            "code": 50035,
                            "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}},
                        },
                    )
                with fake._lock:
                    now = fake.clock()
                    _expire(fake._bucket, now - timedelta(seconds=fake.bucket_seconds))
                    _expire(fake._minute, now - timedelta(minutes=1))
                    if len(fake._bucket) >= fake.bucket_limit or len(fake._minute) >= fake.per_minute:
                        fake.rate_limited += 1
                        if len(fake._bucket) >= fake.bucket_limit:
                            wait_s, scope = fake._reset_after(now), "user"
                        else:
                            wait_s, scope = (fake._minute[0] + timedelta(minutes=1) - now).total_seconds(), "shared"
                        headers = fake._rate_headers(now, remaining=0)
                        headers.update({"Retry-After": str(math.ceil(wait_s)), "X-RateLimit-Scope": scope})
                        answer = {"message": "You are being rate limited.", "retry_after": round(wait_s, 3)}
                        return self._send(429, {**answer, "global": False}, headers)
                    fake._bucket.append(now)
                    fake._minute.append(now)
                    fake._next_id += 1
                    message = {
                        "id": str(fake._next_id),
                        "type": 0,
                        "channel_id": "998877665544332211",
                        "webhook_id": fake.webhook_id,
                        "author": {"id": fake.webhook_id, "username": "svc", "bot": True},
                        "content": content,
                        "mentions": [],
                        "mention_everyone": False,
                        "timestamp": now.isoformat(),
                        "allowed_mentions": body.get("allowed_mentions"),
                        "received_at": now,
                    }
                    fake.messages.append(message)
                    headers = fake._rate_headers(now, remaining=fake.bucket_limit - len(fake._bucket))
                if wait:
                    shown = {k: v for k, v in message.items() if k not in {"allowed_mentions", "received_at"}}
                    self._send(200, shown, headers)
                else:
                    self._send(204, None, headers)

            def _send(self, status: int, body, headers: dict[str, str] | None = None) -> None:
                data = b""
                if isinstance(body, dict):
                    data = json.dumps(body).encode()
                elif isinstance(body, str):
                    data = body.encode()
                self.send_response(status)
                if data:
                    kind = "application/json" if isinstance(body, dict) else "text/html"
                    self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                if data:
                    self.wfile.write(data)

        return Handler

    def _reset_after(self, now: datetime) -> float:
        if not self._bucket:
            return self.bucket_seconds
        return max((self._bucket[0] + timedelta(seconds=self.bucket_seconds) - now).total_seconds(), 0.0)

    def _rate_headers(self, now: datetime, *, remaining: int) -> dict[str, str]:
        reset_after = self._reset_after(now)
        return {
            "X-RateLimit-Limit": str(self.bucket_limit),
            "X-RateLimit-Remaining": str(max(remaining, 0)),
            "X-RateLimit-Reset": f"{(now + timedelta(seconds=reset_after)).timestamp():.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": "6b3d5f2e0c7a9b1d",
        }


def _expire(window: deque[datetime], before: datetime) -> None:
    while window and window[0] <= before:
        window.popleft()
