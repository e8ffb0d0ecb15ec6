"""Slow clients for the tests of `svc serve`'s own limits and of the reverse proxy in front of it: many connections
from one address, each dribbling its request a byte at a time, as a slowloris attack does."""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class Dribble:
    """`count` connections from `source` to `port`, each sending a request line and then one header byte every
    `every` seconds, never finishing its headers, until the server closes it or `stop()`."""

    def __init__(self, port: int, *, source: str = "127.0.0.2", count: int = 150, every: float = 0.5):
        self.sockets: list[socket.socket] = []
        self.answers: dict[int, bytes] = {}  # socket index -> what the server said before closing
        self.closed: set[int] = set()
        self._stop = threading.Event()
        for _ in range(count):
            conn = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: svc\r\nX-Slow: ")
            conn.setblocking(False)
            self.sockets.append(conn)
        self.every = every
        self._thread = threading.Thread(target=self._dribble, daemon=True)
        self._thread.start()

    def _dribble(self) -> None:
        while not self._stop.is_set():
            for index, conn in enumerate(self.sockets):
                if index in self.closed:
                    continue
                self._read(index, conn)
                if index not in self.closed:
                    with contextlib.suppress(OSError):
                        conn.send(b"a")
            self._stop.wait(self.every)

    def _read(self, index: int, conn: socket.socket) -> None:
        try:
            data = conn.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.answers[index] = self.answers.get(index, b"") + data
        else:
            self.closed.add(index)

    def all_closed(self) -> bool:
        return len(self.closed) == len(self.sockets)

    def statuses(self) -> list[str]:
        """The status code each closed connection was answered with ("" for none)."""
        return [self.answers.get(i, b"").split(b" ", 2)[1].decode() if self.answers.get(i) else "" for i in self.closed]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for conn in self.sockets:
            conn.close()


def slow_body(port: int, *, source: str = "127.0.0.3", path: str = "/api/v1/events") -> socket.socket:
    """A connection that sends whole headers, then a body one byte at a time."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0))
    head = f"POST {path} HTTP/1.1\r\nHost: svc\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    conn.sendall(head.encode())
    return conn


def read_until_closed(conn: socket.socket, *, dribble: bytes = b" ", every: float = 0.5, limit: float = 60) -> bytes:
    """Send `dribble` every `every` seconds until the server answers and closes; what it answered."""
    conn.settimeout(every)
    answer = b""
    give_up = time.monotonic() + limit
    while time.monotonic() < give_up:
        try:
            data = conn.recv(4096)
        except TimeoutError:
            with contextlib.suppress(OSError):
                conn.sendall(dribble)
            continue
        except OSError:
            break
        if not data:
            break
        answer += data
    return answer
