"""A TCP relay a test can cut: what a database server stopped (or a network that failed) looks like to a client.

`TcpRelay(("127.0.0.1", 5432))` listens on a free port of its own and pipes every connection to the target.
`hold()` stops passing bytes on, so a query under way waits for its answer (a server that stopped answering);
`cut()` closes every relayed connection and stops listening, so new connections are refused; `restore()` listens
on the same port again, and passes bytes on. Nothing is changed on the target itself, which other tests may share.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class TcpRelay:
    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.port = 0
        self._lock = threading.Lock()
        self._connections: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._flowing = threading.Event()
        self._flowing.set()
        self._listen()

    @classmethod
    def in_front_of(cls, url: str, *, default_port: int = 5432) -> tuple[TcpRelay, str]:
        """A relay to the server `url` names, and `url` aimed at the relay instead (user and database kept)."""
        parts = urlsplit(url)
        relay = cls((parts.hostname or "127.0.0.1", parts.port or default_port))
        netloc = f"{parts.username + '@' if parts.username else ''}127.0.0.1:{relay.port}"
        return relay, urlunsplit(parts._replace(netloc=netloc))

    def _listen(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut or closed
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._connections += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._flowing.wait()  # held: the bytes wait here until the relay is restored or cut
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def hold(self) -> None:
        """Pass nothing on until `restore()` or `cut()`: whoever waits for an answer goes on waiting."""
        self._flowing.clear()

    def cut(self) -> None:
        """Refuse new connections and break every open one."""
        with self._lock:
            listener, self._listener = self._listener, None
            connections, self._connections = self._connections, []
        if listener is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would leave it listening.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self._flowing.set()  # what was held goes nowhere: its sockets are closed

    def restore(self) -> None:
        if self._listener is None:
            self._listen()
        self._flowing.set()

    def close(self) -> None:
        self.cut()
