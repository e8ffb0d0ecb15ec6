"""waitress, holding its own against slow clients: a cap on open connections per client address, a deadline for a
request's headers, and a minimum rate for its body.

waitress alone keeps a connection while it sees any activity (`channel_timeout`), and every byte is activity: 150
connections each sending one byte every 5 s held all of its 100 connections (`connection_limit`) for as long as
they liked, and 150 idle ones made everyone else wait 73 s. Here:

- a client address may hold `max_per_client` connections; one more is answered 429 and closed at once, so one
  address cannot take the server's connections from everyone else. Trusted proxies (`SVC_TRUSTED_PROXY`) are
  exempt: every client behind them shares their address;
- a request's headers must be complete `header_timeout` seconds after it began (after the connection was accepted,
  for its first request), or it is answered 408 and closed;
- its body must then arrive at `body_min_rate` bytes a second at least, after a grace of `header_timeout`, or 408.

The checks run on waitress's own loop (its `maintenance`, every `cleanup_interval` second), never in a request's
thread; a connection whose request is being served is left alone. An idle keep-alive connection between requests
keeps waitress's `channel_timeout`. Behind a buffering reverse proxy (docs/operating.md) none of this is reached:
the proxy holds slow clients itself and sends each request whole.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import MultiSocketServer, TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

log = logging.getLogger("svc.server")
REPORT_SECONDS = 10.0
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class ClientLimits:
    max_per_client: int = 20
    header_timeout: float = 10.0
    body_min_rate: float = 500.0
    exempt: tuple[Network, ...] = ()  # trusted proxies: many clients behind one address

    def is_exempt(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.exempt)


def _refusal(status: str, detail: str, extra_headers: str = "") -> bytes:
    code = status.split()[0]
    title = status.split(" ", 1)[1]
    body = (
        f'{{"type": "https://svc.invalid/problems/{"too-many-connections" if code == "429" else "request-timeout"}", '
        f'"title": "{title}", "status": {code}, "detail": "{detail}"}}'
    ).encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/problem+json\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\n{extra_headers}\r\n"
    ).encode()
    return head + body


TOO_MANY = _refusal(
    "429 Too Many Requests",
    "this address holds too many open connections; close some, or retry in a second",
    "Retry-After: 1\r\n",
)
HEADERS_TOO_SLOW = _refusal("408 Request Timeout", "the request's headers did not arrive in time")
BODY_TOO_SLOW = _refusal("408 Request Timeout", "the request's body arrived too slowly")


class GuardedChannel(HTTPChannel):
    """A connection that knows when its request began, and how much of its body has arrived."""

    def __init__(self, server: GuardedServer, sock, addr, adj, **socket_map):
        # waitress hands its socket map in as `map=`: passed on by the name it gives, without one of ours that
        # hides the builtin.
        self.client = str(addr[0]) if isinstance(addr, tuple) and addr else str(addr)
        self.counted = False
        super().__init__(server, sock, addr, adj, **socket_map)
        # The first request's headers are due from the accept: a connection that sends nothing is slow too.
        self.request_began: float | None = time.monotonic()
        self.headers_done_at: float | None = None
        self.body_bytes = 0
        if server.over_cap(self):
            self.refuse(TOO_MANY, "connections")

    def add_channel(self, socket_map=None) -> None:
        super().add_channel(socket_map)
        self.server.count(self, +1)

    def del_channel(self, socket_map=None) -> None:
        super().del_channel(socket_map)
        self.server.count(self, -1)

    def received(self, data: bytes) -> bool:
        now = time.monotonic()
        if self.request is None and self.request_began is None:
            self.request_began = now  # the first byte of a later request on a kept-alive connection
        in_body = self.request is not None and self.request.headers_finished
        result = super().received(data)
        if self.request is None:  # complete (or nothing begun): the next request's clock starts with its first byte
            self.request_began, self.headers_done_at, self.body_bytes = None, None, 0
        elif self.request.headers_finished:
            if self.headers_done_at is None:
                self.headers_done_at = now
            elif in_body:
                self.body_bytes += len(data)
        return result

    def overdue(self, now: float, limits: ClientLimits) -> bytes | None:
        """The answer for a request that broke its deadline, or None."""
        if self.requests or self.will_close or self.close_when_flushed or self.request_began is None:
            return None  # being served, closing, or idle between requests (waitress's channel_timeout)
        if self.headers_done_at is None:
            return HEADERS_TOO_SLOW if now - self.request_began > limits.header_timeout else None
        allowed = limits.header_timeout + self.body_bytes / limits.body_min_rate
        return BODY_TOO_SLOW if now - self.headers_done_at > allowed else None

    def refuse(self, answer: bytes, why: str) -> None:
        """Answer `answer` and close; runs on waitress's loop thread, like waitress's own 100 Continue."""
        with self.outbuf_lock:
            self.outbufs[-1].append(answer)
            self.current_outbuf_count += len(answer)
            self.total_outbufs_len += len(answer)
        self.close_when_flushed = True
        self.server.refused(self.client, why)


class GuardedServer(TcpWSGIServer):
    channel_class = GuardedChannel

    def __init__(self, application, *, limits: ClientLimits, **kw: Any):
        self.limits = limits
        self._open: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._refused: Counter[str] = Counter()
        self._refused_from: set[str] = set()
        self._next_report = 0.0  # the first refusals are told at once, later ones once per REPORT_SECONDS
        super().__init__(application, **kw)

    def count(self, channel: GuardedChannel, step: int) -> None:
        with self._lock:
            if step > 0 and not channel.counted:
                channel.counted = True
                self._open[channel.client] += 1
            elif step < 0 and channel.counted:
                channel.counted = False
                self._open[channel.client] -= 1
                if self._open[channel.client] <= 0:
                    del self._open[channel.client]

    def over_cap(self, channel: GuardedChannel) -> bool:
        with self._lock:
            crowded = self._open[channel.client] > self.limits.max_per_client
        return crowded and not self.limits.is_exempt(channel.client)

    def refused(self, client: str, why: str) -> None:
        self._refused[why] += 1
        self._refused_from.add(client)
        log.debug("connection refused", extra={"client": client, "why": why})

    def maintenance(self, now: float) -> None:
        super().maintenance(now)
        mono = time.monotonic()
        for channel in list(self.active_channels.values()):
            if isinstance(channel, GuardedChannel):
                answer = channel.overdue(mono, self.limits)
                if answer is not None:
                    channel.refuse(answer, "headers" if answer is HEADERS_TOO_SLOW else "body")
        if self._refused and mono >= self._next_report:
            # One line per interval, not one per refused connection: an attack must not flood the log.
            log.warning(
                "refused slow or crowding connections",
                extra={"refused": dict(self._refused), "addresses": sorted(self._refused_from)[:20]},
            )
            self._refused.clear()
            self._refused_from.clear()
            self._next_report = mono + REPORT_SECONDS


def create_server(application, *, limits: ClientLimits, **settings: Any):
    """A waitress server (one per address the host resolves to) with `limits`; `.run()` serves until stopped."""
    adj = Adjustments(**settings)
    socket_map: dict = {}
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(adj.threads)
    servers = [
        GuardedServer(application, limits=limits, map=socket_map, dispatcher=dispatcher, adj=adj, sockinfo=sockinfo)
        for sockinfo in adj.listen
    ]
    if len(servers) == 1:
        return servers[0]
    listening = [(s.effective_host, s.effective_port) for s in servers]
    return MultiSocketServer(socket_map, adj, listening, dispatcher, servers[-1].log_info)


def limits_of(config: Any, exempt: Iterable[Network]) -> ClientLimits:
    return ClientLimits(
        max_per_client=config.max_connections_per_client,
        header_timeout=config.request_header_timeout,
        body_min_rate=config.request_body_min_rate,
        exempt=tuple(exempt),
    )
