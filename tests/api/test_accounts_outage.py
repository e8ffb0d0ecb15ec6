"""A person's password check that the database fails: the request that ran it and every request that waited for its
answer (the same credentials, a page's parallel requests) are answered as a database outage is, 503 with
`Retry-After` and the database-unavailable problem, never 429; once the database is back the credentials go through.
On both backends, with the database taken away while the check reads the account."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from api.auth import PeopleCredentials
from domain import accounts
from storage import db as storage_db

from conftest import CI_SECRET, PASSWORDS
from processes import wait_until
from servers.tcp_relay import TcpRelay
from testclient import ApiClient

pytestmark = pytest.mark.both_backends

PASSWORD = "olga-password-1"


class DatabaseAway:
    """Takes the database away from this process while a read is under way, then gives it back.

    SQLite: another connection holds the file in exclusive locking mode (as a maintenance script can), so this
    process's next connection waits through SQLite's busy timeout and fails with "database is locked". PostgreSQL:
    the app reaches the server through a relay that first holds every byte (the read waits for its answer), then is
    cut (the read fails), as when the server stops answering and then goes away.
    """

    def __init__(self, database_url: str):
        self.path = database_url.removeprefix("sqlite:///") if database_url.startswith("sqlite") else None
        self.url = database_url
        self.relay: TcpRelay | None = None
        self.holder: sqlite3.Connection | None = None
        if self.path is None:
            self.relay, self.url = TcpRelay.in_front_of(database_url)

    def begin(self) -> None:
        if self.relay is not None:
            self.relay.hold()
            return
        # This process keeps no connection open (the group-commit writer finishes and closes its own; the pool
        # closes the rest), so the exclusive lock can be taken; its next connection then waits for it.
        storage_db.bind(storage_db.db.obj)
        storage_db.db.obj.close_all()
        self.holder = sqlite3.connect(self.path, isolation_level=None)
        self.holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        self.holder.execute("BEGIN EXCLUSIVE")

    def fail(self) -> None:
        """Make the read under way fail now (SQLite's fails by itself when its busy timeout runs out)."""
        if self.relay is not None:
            self.relay.cut()

    def end(self) -> None:
        if self.relay is not None:
            self.relay.restore()
        if self.holder is not None:
            self.holder.close()  # the exclusive lock is held until the connection closes
            self.holder = None

    def close(self) -> None:
        self.end()
        if self.relay is not None:
            self.relay.close()


def test_requests_waiting_for_a_password_check_the_database_failed_get_its_503(app_factory, config_factory):
    away = DatabaseAway(config_factory().database_url)
    try:
        people = PeopleCredentials(PASSWORDS)
        app = app_factory(config_factory(database_url=away.url), people=people)
        accounts.add("olga", "operator", PASSWORD, passwords=PASSWORDS)
        clients = [ApiClient(app, basic=f"olga:{PASSWORD}", ci_secret=CI_SECRET) for _ in range(3)]
        assert all(c.document for c in clients)  # each client reads the API's document before, not during
        answers: list = []
        # A page's parallel requests, with credentials not yet checked.
        threads = [threading.Thread(target=lambda c=c: answers.append(c.get("/api/v1/wallet"))) for c in clients]
        away.begin()
        try:
            for thread in threads:
                thread.start()
            # One request checks the password, reading the account; the two others wait for its answer.
            wait_until(lambda: people.waiting() == 2, timeout=30, what="two requests waiting for the first's check")
            away.fail()
            wait_until(lambda: len(answers) == 3, timeout=60, what="an answer to every request")
        finally:
            away.end()
            for thread in threads:
                thread.join(timeout=60)

        assert [a.status_code for a in answers] == [503] * 3, [a.text for a in answers]
        for answer in answers:
            assert answer.headers["content-type"] == "application/problem+json"
            assert answer.json["type"].endswith("/database-unavailable")
            assert int(answer.headers["retry-after"]) >= 1
        assert people.waiting() == 0
        # Back: the same credentials are checked anew, and go through.
        wait_until(lambda: clients[0].get("/api/v1/wallet").status_code == 200, timeout=30, what="the database back")
    finally:
        away.close()
