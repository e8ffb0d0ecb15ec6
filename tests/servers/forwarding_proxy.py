"""A small reverse proxy, as nginx with `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for` behaves:
each request is forwarded to one upstream on a new connection from this machine, with the client's address
appended to whatever `X-Forwarded-For` the client sent, `X-Forwarded-Proto` set, and `Host` kept.

`forwarded` keeps the `X-Forwarded-For` of every request it sent upstream, so a test can say what the proxy told.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Hop-by-hop headers (RFC 9110, 7.6.1) end at the proxy; the body is re-framed with Content-Length.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}


class ForwardingProxy:
    def __init__(self, upstream_host: str, upstream_port: int, *, listen: str = "127.0.0.1"):
        self.upstream = (upstream_host, upstream_port)
        self.forwarded: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((listen, 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def __enter__(self) -> ForwardingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                headers.pop("X-Forwarded-For", None)
                given = self.headers.get_all("X-Forwarded-For") or []
                forwarded_for = ", ".join([*given, self.client_address[0]])
                headers["X-Forwarded-For"] = forwarded_for
                headers["X-Forwarded-Proto"] = "http"
                with proxy._lock:
                    proxy.forwarded.append(forwarded_for)
                upstream = http.client.HTTPConnection(*proxy.upstream, timeout=30)
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    payload = answer.read()
                    self.send_response(answer.status, answer.reason)
                    for name, value in answer.getheaders():
                        if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                            self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                finally:
                    upstream.close()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, *args) -> None:
                pass

        return Handler
