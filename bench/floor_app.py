"""The floor: the least a durable notify must do on this stack, and so the limit the service is measured against.

Falcon on waitress with the service's threads. A POST reads its body, parses it with orjson, checks one field and
hands one unit to a group-commit writer thread; the writer owns a raw `sqlite3` connection (WAL,
`synchronous=FULL`), runs per unit one insert each into a receipt, a run and an outbox table and one update of a
ticket row, commits once for all the units waiting, and then wakes their requests. Each request leaves one INFO
access line in a file. Nothing else: no credentials, no schema, no ORM, no state machine, a ~50-byte answer.

    python bench/floor_app.py PORT THREADS DATABASE LOG
"""

from __future__ import annotations

import _thread
import logging
import queue
import sqlite3
import sys
import threading
import time

import falcon
import orjson
import waitress

SCHEMA = """
CREATE TABLE IF NOT EXISTS ticket (key TEXT PRIMARY KEY, stage TEXT NOT NULL, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS receipt (id INTEGER PRIMARY KEY, ticket TEXT NOT NULL, at REAL NOT NULL, data TEXT);
CREATE TABLE IF NOT EXISTS run (id INTEGER PRIMARY KEY, agent TEXT NOT NULL, status TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, payload TEXT NOT NULL);
INSERT OR IGNORE INTO ticket VALUES ('WRITING-DAILY', 'ready', 0);
"""
INSERT_RECEIPT = "INSERT INTO receipt (ticket, at, data) VALUES ('WRITING-DAILY', ?, ?)"
INSERT_RUN = "INSERT INTO run (agent, status, at) VALUES ('writing-daily', ?, ?)"
INSERT_OUTBOX = "INSERT INTO outbox (kind, payload) VALUES ('chat', ?)"
UPDATE_TICKET = "UPDATE ticket SET version = version + 1 WHERE key = 'WRITING-DAILY'"


class Writer:
    """One thread, one connection: runs the units that are waiting, commits once, then wakes their requests."""

    def __init__(self, path: str):
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.executescript(SCHEMA)
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="floor-writer", daemon=True).start()

    def submit(self, status: str, body: bytes) -> int:
        """Queue one unit and wait for its commit; its run's id."""
        woken = _thread.allocate_lock()
        woken.acquire()
        unit = [status, body, woken, 0]
        self.queue.put(unit)
        woken.acquire()  # released by the writer after the commit
        return unit[3]

    def _loop(self) -> None:
        execute = self.connection.execute
        while True:
            batch = [self.queue.get()]
            while True:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            execute("BEGIN IMMEDIATE")
            now = time.time()
            for unit in batch:
                execute(INSERT_RECEIPT, (now, unit[1]))
                unit[3] = execute(INSERT_RUN, (unit[0], now)).lastrowid
                execute(INSERT_OUTBOX, (unit[1],))
                execute(UPDATE_TICKET)
            execute("COMMIT")
            for unit in batch:
                unit[2].release()


class Notify:
    def __init__(self, writer: Writer):
        self.writer = writer

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = req.bounded_stream.read()
        status = orjson.loads(raw).get("status")
        if not isinstance(status, str):
            raise falcon.HTTPBadRequest(title="status is required")
        resp.data = b'{"ok":true,"run":%d}' % self.writer.submit(status, raw)
        resp.content_type = falcon.MEDIA_JSON


class AccessLog:
    """One INFO line per request, as the service writes one."""

    def __init__(self, log: logging.Logger):
        self.log = log

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        self.log.info("%s %s %s", req.method, req.path, resp.status)


def create_app(database: str, log_path: str) -> falcon.App:
    log = logging.getLogger("floor.access")
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    # waitress warns on every request it queues while its threads are busy (every request, under load), through
    # logging's last-resort handler: not work a durable write needs (the service samples them, svc/logs.py).
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    app = falcon.App(middleware=[AccessLog(log)])
    app.add_route("/floor", Notify(Writer(database)))
    app.add_route("/", Health())
    return app


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.data = b'{"ok":true}'


if __name__ == "__main__":
    port, threads, database, log_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    waitress.serve(
        create_app(database, log_path), host="127.0.0.1", port=port, threads=threads, ident="floor", _quiet=True
    )
