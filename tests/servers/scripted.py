"""A local HTTP server that answers what the test scripts, for what every target does alike
(`integrations/transport.py`): any status, headers and body, or an answer held back longer than the caller waits.
It keeps every request it got.

`answer(...)` queues the next answers, in order, whatever the path; with none queued it answers 200 `{}`. The
answer's `Date` header is the test's when it gives one (so a `Retry-After` date and the `Date` it counts from can be
written from one instant), else the server's clock.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Scripted:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"{}"
    delay: float = 0.0


class ScriptedServer:
    def __init__(self, host: str = "127.0.0.1"):
        self.requests: list[dict] = []
        self._script: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._released = threading.Event()  # set on stop: a held answer ends at once
        self._server = ThreadingHTTPServer((host, 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def answer(
        self,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        body: dict | list | str | bytes = b"{}",
        delay: float = 0.0,
        times: int = 1,
    ) -> None:
        """Queue the next `times` answers; `delay` holds each that many seconds before it is sent."""
        if isinstance(body, dict | list):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        with self._lock:
            self._script.extend(Scripted(status, dict(headers or {}), body, delay) for _ in range(times))

    def url(self, path: str = "/") -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{path}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with server._lock:
                    server.requests.append(
                        {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": raw}
                    )
                    scripted = server._script.popleft() if server._script else Scripted(200)
                if scripted.delay:
                    server._released.wait(scripted.delay)
                self.send_response_only(scripted.status)
                if "Date" not in scripted.headers:
                    self.send_header("Date", self.date_time_string())
                for name, value in scripted.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(scripted.body)))
                self.end_headers()
                # The caller may have stopped waiting: its timeout is what the test looks at.
                with contextlib.suppress(OSError):
                    self.wfile.write(scripted.body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        return Handler
