"""People's accounts through the API: a viewer reads everything and changes nothing (every changing operation
is taken from the app's own operation table, through the document built from it); an operator's actions carry
their name; remembered credentials follow the account's row; a wrong account password counts as a failure."""

from __future__ import annotations

import base64
import itertools
import re
import threading

import pytest
from dispatch_kit import make_job

from api.auth import CHECKS_ADMITTED, RECHECK_SECONDS, REMEMBER_SECONDS, FailedCredentials, PeopleCredentials
from api.operations import changes_something
from domain.accounts import CONCURRENT_CHECKS, Passwords

from conftest import BASIC, CI_SECRET, PASSWORDS
from events_kit import example
from processes import wait_until
from testclient import ApiClient

VIEWER = ("vera", "vera-password-1")
OPERATOR = ("olga", "olga-password-1")


class Ticks:
    """A monotonic clock that moves only when told (for the remembered credentials)."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ticks():
    return Ticks()


@pytest.fixture
def people(app_factory, config, ticks):
    """The app, with a viewer and an operator account; returns (bootstrap, viewer, operator) clients."""
    from domain import accounts

    app = app_factory(config, people=PeopleCredentials(PASSWORDS, monotonic=ticks))
    accounts.add(VIEWER[0], "viewer", VIEWER[1], passwords=PASSWORDS)
    accounts.add(OPERATOR[0], "operator", OPERATOR[1], passwords=PASSWORDS)
    bootstrap = ApiClient(app, basic=BASIC, ci_secret=CI_SECRET)
    bootstrap.post("/api/v1/initiatives", json={"id": "port", "name": "Port", "stage": "active"})
    viewer = ApiClient(app, basic=":".join(VIEWER), ci_secret=CI_SECRET)
    operator = ApiClient(app, basic=":".join(OPERATOR), ci_secret=CI_SECRET)
    return bootstrap, viewer, operator


def everything_stored() -> dict[str, list[str]]:
    """Every row of every table, as text: what "records nothing" is checked against."""
    from storage.db import connection
    from storage.models import ALL_MODELS

    with connection():
        return {m._meta.table_name: sorted(repr(row) for row in m.select().dicts()) for m in ALL_MODELS}


class Fresh:
    """Values for one attempt at an operation: its own ticket, slot and names, so every attempt can succeed."""

    counter = itertools.count(1)

    def __init__(self, bootstrap: ApiClient):
        n = next(self.counter)
        self.ticket = f"PORT-{n}"
        self.slot = f"bay-{n}"
        self.new_key = f"NEW-{n}"
        self.name = f"Initiative {n}"
        made = bootstrap.post(
            "/api/v1/tickets",
            json={"key": self.ticket, "initiative_id": "port", "title": "Fresh", "stage": "queued"},
        )
        assert made.status_code == 201, made.text
        self._job: int | None = None

    def job(self) -> str:
        """A queued dispatch job of its ticket (made when first asked for)."""
        if self._job is None:
            self._job = make_job(self.ticket)
        return str(self._job)

    def ended_job(self, **state) -> str:
        """A job of its ticket that ended so (a cancelled one to run again, one whose forge write failed)."""
        from storage.db import connection
        from storage.models import DispatchJob

        job = int(self.job())
        with connection():
            DispatchJob.update(**state).where(DispatchJob.id == job).execute()
        return str(job)


# A request body an operator's request would succeed with, per request schema. A changing operation whose schema
# is missing here fails the test below, so a new operation cannot slip past it.
BODIES = {
    "initiative-create": lambda f: {"name": f.name},
    "initiative-patch": lambda f: {"stage": "done"},
    "ticket-create": lambda f: {"key": f.new_key, "initiative_id": "port", "title": "New"},
    "ticket-move": lambda f: {"to": "execute"},
    "ticket-action": lambda f: {"reason": "tried by a test"},
    "slot-claim": lambda f: {"ticket": f.ticket},
    "wallet-put": lambda f: {"budget": 100.0, "spent": 12.5, "locked": True},
    "writing-automation-set": lambda f: {"enabled": False},
    "ops-pulse-request": lambda f: {"post_to_chat": "never"},
    "ops-empty-request": lambda f: {},
    "router-policy-put": lambda f: {
        "policy": {"allowlist": [f.new_key.lower()], "retry_budget": 2, "fleet_size": 1, "rules": []},
        "reason": "tried by a test",
    },
    "router-dispatch-put": lambda f: {"paused": True, "reason": "tried by a test"},
}
PATH_VALUES = {
    "key": lambda f: f.ticket,
    "initiative_id": lambda f: "port",
    "name": lambda f: f.slot,
    "job_id": lambda f: f.job(),
}


def _people_operations(document: dict, *, changing: bool) -> list[tuple[str, str, dict]]:
    """(method, path template, operation) of every documented operation basic credentials open to people (the workers'
    own endpoints are refused to people: `tests/api/test_dispatch.py`)."""
    found = []
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            if op.get("x-svc-workers") == "only":
                continue
            changes = changes_something(method) and not op.get("x-svc-changes-nothing", False)
            if {"basic": []} in op["security"] and changes == changing:
                found.append((method.upper(), path, op))
    return found


def _path(template: str, fill) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: fill(m.group(1)), template)


def test_a_viewer_gets_403_and_records_nothing_on_every_operation_that_changes_something(people):
    bootstrap, viewer, operator = people
    changing = _people_operations(bootstrap.document, changing=True)
    assert len(changing) >= 12, changing  # the table really was read: tickets, initiatives, slots, wallet, ops...
    for method, template, op in changing:
        fresh = Fresh(bootstrap)
        # Running a job again, or its forge write, needs one that ended so.
        if template.endswith("/forge/retry"):
            fresh.ended_job(state="succeeded", forge_state="failed")
        elif template.endswith("/retry"):
            fresh.ended_job(state="cancelled")
        path = _path(template, lambda name, fresh=fresh: PATH_VALUES[name](fresh))
        body = None
        if "requestBody" in op:
            schema = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
            assert schema in BODIES, f"{method} {template}: add an example body for {schema} to this test"
            body = BODIES[schema](fresh)
        # A change that must name the version it was decided on (If-Match, required) names whatever is current.
        required = [p["name"] for p in op.get("parameters", []) if p["in"] == "header" and p["required"]]
        headers = {"If-Match": "*"} if "If-Match" in required else {}
        before = everything_stored()
        refused = viewer.request(method, path, json=body, headers=headers)
        assert refused.status_code == 403, (method, path, refused.text)
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json["type"].endswith("/viewer") and "vera" in refused.json["detail"]
        assert everything_stored() == before, f"{method} {path}: a viewer's refused request recorded something"
        # The same request from an operator goes through: the viewer was refused for who they are, not for the body.
        done = operator.request(method, path, json=body, headers=headers)
        assert done.status_code < 300, (method, path, done.text)


def test_a_viewer_reads_every_operation_that_changes_nothing(people):
    bootstrap, viewer, _ = people
    bootstrap.post("/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "port", "title": "One"})
    reading = _people_operations(bootstrap.document, changing=False)
    assert any(path == "/" for _, path, _ in reading) and any(p == "/tickets/{key}" for _, p, _ in reading)

    recorded = bootstrap.post("/api/v1/events", json=example("envelopes/valid/opened.json"), auth="ci")
    decision_id = str(recorded.json["decision"]["id"])

    job_id = str(make_job("PORT-1"))

    def value(op: dict, name: str) -> str:
        if name == "decision_id":
            return decision_id
        if name == "job_id":
            return job_id
        (param,) = [p for p in op.get("parameters", []) if p["name"] == name and p["in"] == "path"]
        return param["schema"].get("enum", [{"initiative_id": "port"}.get(name, "PORT-1")])[0]

    assert any(method == "POST" for method, _, _ in reading)  # a backtest changes nothing: a viewer may run it
    for method, template, op in reading:
        body = {"json": {}} if "requestBody" in op else {}
        result = viewer.request(method, _path(template, lambda name, op=op: value(op, name)), **body)
        assert result.status_code == 200, (method, template, result.status_code)


def test_every_changing_operation_documents_the_viewers_403(people):
    bootstrap, _, _ = people
    for method, path, op in _people_operations(bootstrap.document, changing=True):
        assert "viewer" in op["responses"]["403"]["description"], (method, path)
    assert "viewer" in bootstrap.document["components"]["securitySchemes"]["basic"]["description"]


def test_an_operators_actions_carry_their_name(people):
    bootstrap, _, operator = people
    assert operator.post("/api/v1/initiatives", json={"id": "docs", "name": "Docs"}).json["updated_by"] == "olga"
    assert operator.patch("/api/v1/initiatives/docs", json={"stage": "active"}).json["updated_by"] == "olga"
    ticket = {"key": "DOCS-1", "initiative_id": "docs", "title": "Write", "stage": "queued"}
    operator.post("/api/v1/tickets", json=ticket)
    operator.post("/api/v1/tickets/DOCS-1/move", json={"to": "execute"})
    operator.post("/api/v1/slots/bay-1/claim", json={"ticket": "DOCS-1"})
    operator.post("/api/v1/tickets/DOCS-1/mark_done", json={})
    entries = operator.get("/api/v1/tickets/DOCS-1/timeline").json["entries"]
    assert [e["kind"] for e in entries] == ["marked_done", "slot_claimed", "stage_changed", "created"]
    assert all(e["data"]["actor"] == "olga" and "olga" in e["summary"] for e in entries), entries

    assert operator.put("/api/v1/wallet", json={"budget": 50, "spent": 1, "locked": True}).json["updated_by"] == "olga"
    assert bootstrap.get("/api/v1/ops/snapshot").json["wallet"]["updated_by"] == "olga"
    assert operator.post("/api/v1/agents/writing/automation", json={"enabled": False}).json["updated_by"] == "olga"
    writing = bootstrap.get("/api/v1/tickets/WRITING-DAILY/timeline").json["entries"][0]
    assert (writing["kind"], writing["data"]["actor"]) == ("automation_changed", "olga")
    run = operator.post("/api/v1/ops/pulse", json={"post_to_chat": "never"}).json["run"]
    assert run["details"]["actor"] == "olga"

    _record_a_scheduled_run()  # run by no one: the strip shows it without a name
    page = bootstrap.get("/tickets/DOCS-1").text
    # Her four actions, and the release of bay-1 by the slot steward her pulse ran.
    assert page.count('<span class="by">by <strong>olga</strong></span>') == 5
    board = bootstrap.get("/").text
    assert "turned off by <strong>olga</strong>" in board
    assert board.count("· by olga") == 2  # her pulse's run and the steward's it started, on the agents strip
    assert "<strong>✓ SENT</strong> 2026-11-20 08:00:00 UTC<br>the digest" in board  # a scheduled run: no one
    # And the bootstrap credentials still act, as themselves.
    bootstrap.post("/api/v1/tickets", json={"key": "DOCS-2", "initiative_id": "docs", "title": "Two"})
    assert bootstrap.get("/api/v1/tickets/DOCS-2/timeline").json["entries"][0]["data"]["actor"] == "admin"


def _record_a_scheduled_run() -> None:
    from datetime import UTC, datetime

    from domain.ops.runs import Trigger, record
    from storage.db import connection, transaction

    at = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    with connection(), transaction():
        record(
            "ops-weekly-digest",
            trigger=Trigger("schedule", scheduled_for=at),
            started_at=at,
            finished_at=at,
            status="SENT",
            ok=True,
            summary="the digest",
        )


def test_the_pages_show_who_is_signed_in_and_hide_controls_from_a_viewer(people):
    bootstrap, viewer, operator = people
    bootstrap.post("/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "port", "title": "One"})
    for client, role, controls in ((viewer, "viewer", False), (operator, "operator", True)):
        board, ticket = client.get("/").text, client.get("/tickets/PORT-1").text
        assert f'<span class="role role-{role}">' in board
        assert ('id="writing-automation"' in board) is controls
        assert ('data-action="mark_done"' in board) is controls
        assert ('data-action="cancel"' in ticket) is controls
    assert "can look, not change" in viewer.get("/").text
    assert "Writing automation (scheduled catch-up): " in viewer.get("/").text  # the state, as words


def test_credentials_are_remembered_until_the_account_row_changes(people, ticks):
    from domain import accounts

    _, viewer, operator = people
    assert viewer.get("/api/v1/wallet").status_code == 200
    assert operator.get("/api/v1/wallet").status_code == 200
    accounts.change_role("vera", "operator")
    accounts.change_password("olga", "olga-password-2", passwords=PASSWORDS)
    # Within RECHECK_SECONDS of the last look at the rows, this process still answers from what it remembered...
    assert viewer.post("/api/v1/agents/writing/automation", json={"enabled": False}).status_code == 403
    assert operator.get("/api/v1/wallet").status_code == 200
    ticks.now += RECHECK_SECONDS
    # ...and then it reads them again: a new role applies, an old password stops working.
    assert viewer.post("/api/v1/agents/writing/automation", json={"enabled": False}).status_code == 200
    assert operator.get("/api/v1/wallet").status_code == 401
    renewed = ApiClient(operator.client.app, basic="olga:olga-password-2", ci_secret=CI_SECRET)
    assert renewed.get("/api/v1/wallet").status_code == 200
    accounts.remove("vera")
    ticks.now += RECHECK_SECONDS
    assert viewer.get("/api/v1/wallet").status_code == 401


def test_remembered_credentials_keep_no_password(app_factory, config, ticks):
    from domain import accounts

    people = PeopleCredentials(PASSWORDS, monotonic=ticks)
    app = app_factory(config, people=people)
    accounts.add("vera", "viewer", "vera-password-1", passwords=PASSWORDS)
    client = ApiClient(app, basic="vera:vera-password-1", ci_secret=CI_SECRET)
    assert client.get("/api/v1/wallet").status_code == 200
    assert len(people) == 1
    kept = repr(people._entries).encode() + b"".join(people._entries)
    for form in (b"vera-password-1", b"vera:vera-password-1", base64.b64encode(b"vera:vera-password-1")):
        assert form not in kept
    assert b"$argon2id$" in kept  # the hash is what a change of password is noticed by
    ticks.now += REMEMBER_SECONDS
    assert client.get("/api/v1/wallet").status_code == 200  # checked with argon2id anew, and remembered again
    assert len(people) == 1


def test_a_wrong_account_password_counts_toward_the_lockout(app_factory, config, ticks):
    from domain import accounts

    failures = FailedCredentials(monotonic=ticks)
    app = app_factory(config, failures=failures, people=PeopleCredentials(PASSWORDS, monotonic=ticks))
    accounts.add("olga", "operator", "olga-password-1", passwords=PASSWORDS)
    wrong = ApiClient(app, basic="olga:not-her-password", ci_secret=CI_SECRET)
    assert wrong.document
    right = ApiClient(app, basic="olga:olga-password-1", ci_secret=CI_SECRET)
    for _ in range(10):
        assert wrong.get("/api/v1/wallet").status_code == 401
    locked = right.get("/api/v1/wallet")
    assert locked.status_code == 429 and 1 <= int(locked.headers["retry-after"]) <= 60
    ticks.now += 61
    assert right.get("/api/v1/wallet").status_code == 200


class HeldHasher:
    """argon2-cffi's own hasher (the suite's cheap one), whose checks wait until the test lets them finish: a password
    check as slow as the test needs, so what happens to the requests behind it can be watched. `passwords` checks
    with it."""

    def __init__(self, real):
        self.real = real
        self.passwords = Passwords(self)
        self.go = threading.Event()
        self.go.set()
        self._lock = threading.Lock()
        self.verified = 0

    def hash(self, password: str) -> str:
        return self.real.hash(password)

    def verify(self, password_hash: str, password: str) -> bool:
        with self._lock:
            self.verified += 1
        assert self.go.wait(timeout=60), "the test never let the check finish"
        return self.real.verify(password_hash, password)


@pytest.fixture
def held():
    return HeldHasher(PASSWORDS.hasher)


def _in_threads(calls) -> tuple[list, list[threading.Thread]]:
    """Start each call in its own thread; the list fills with (index, answer) as they come back."""
    answers: list = []

    def run(i, call):
        answers.append((i, call()))

    threads = [threading.Thread(target=run, args=(i, call), daemon=True) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    return answers, threads


@pytest.mark.parametrize("passwords", ["one wrong password each", "the same wrong password"])
def test_a_flood_of_wrong_passwords_is_answered_at_once_instead_of_queueing_for_argon2(
    app_factory, config, ticks, held, passwords
):
    """Each request waiting for a password check holds a server thread, one fewer for everyone else: with every
    place taken, further credentials that are not remembered get 429 at once (not counted as a failure), and
    remembered credentials still go through. Requests with the same credentials share one check."""
    from domain import accounts

    people = PeopleCredentials(held.passwords, monotonic=ticks)
    app = app_factory(config, people=people)
    accounts.add("olga", "operator", "olga-password-1", passwords=PASSWORDS)
    olga = ApiClient(app, basic="olga:olga-password-1", ci_secret=CI_SECRET)
    assert olga.get("/api/v1/wallet").status_code == 200  # remembered from here on
    held.go.clear()
    held.verified = 0
    same = passwords == "the same wrong password"
    flood = 8  # twice the places, and within the database pool a request's connection comes from
    # Every request from its own address, so no address reaches the lockout: a botnet's flood.
    clients = [ApiClient(app, basic=f"olga:wrong-{0 if same else n}", ci_secret=CI_SECRET) for n in range(flood)]
    assert all(c.document for c in clients)  # each client reads the API's document before the flood, not in it
    calls = [lambda c=c, n=n: c.get("/api/v1/wallet", remote_addr=f"10.0.0.{n + 1}") for n, c in enumerate(clients)]
    answers, threads = _in_threads(calls)
    try:
        wait_until(lambda: len(answers) == flood - CHECKS_ADMITTED, timeout=30, what="the flood's answers")
        assert all(a.status_code == 429 and a.headers["retry-after"] == "1" for _, a in answers), answers
        assert all(a.json["type"].endswith("/too-many-requests") for _, a in answers)
        assert olga.get("/api/v1/wallet").status_code == 200  # while the checks are still under way
        if same:  # one request checks, the others wait for its answer instead of each running argon2 in turn
            wait_until(lambda: people.waiting() == CHECKS_ADMITTED - 1, timeout=30, what="the others waiting")
            assert held.verified == 1
        else:  # argon2 runs two at a time; two more wait their turn
            wait_until(lambda: held.verified == CONCURRENT_CHECKS, timeout=30, what="two checks under way")
    finally:
        held.go.set()
        for thread in threads:
            thread.join(timeout=60)
    assert sorted(a.status_code for _, a in answers) == [401] * CHECKS_ADMITTED + [429] * (flood - CHECKS_ADMITTED)
    assert held.verified == (1 if same else CHECKS_ADMITTED)


def test_an_unknown_name_costs_an_argon2_check_like_a_wrong_password(app, held):
    """Otherwise the time an answer takes tells which names have accounts."""
    from domain import accounts

    accounts.add("olga", "operator", "olga-password-1", passwords=PASSWORDS)
    held.verified = 0
    assert accounts.check("olga", "not-her-password", passwords=held.passwords) is None
    assert accounts.check("nobody", "not-her-password", passwords=held.passwords) is None
    assert accounts.check("Not A Name", "not-her-password", passwords=held.passwords) is None
    assert held.verified == 3


def test_remembered_credentials_due_for_their_next_argon2_check_wait_for_it_even_when_a_flood_took_every_place(
    app_factory, config, ticks, held
):
    """Once a minute a remembered account's password is checked anew; a flood of wrong passwords must not turn that
    into a 429 for every request the person's script has in flight."""
    from domain import accounts

    people = PeopleCredentials(held.passwords, monotonic=ticks)
    app = app_factory(config, people=people)
    accounts.add("olga", "operator", "olga-password-1", passwords=PASSWORDS)
    olga = ApiClient(app, basic="olga:olga-password-1", ci_secret=CI_SECRET)
    assert olga.get("/api/v1/wallet").status_code == 200
    held.go.clear()
    held.verified = 0
    flood = [ApiClient(app, basic=f"olga:wrong-{n}", ci_secret=CI_SECRET) for n in range(CHECKS_ADMITTED + 1)]
    assert all(c.document for c in flood) and olga.document
    calls = [lambda c=c, n=n: c.get("/api/v1/wallet", remote_addr=f"10.0.2.{n + 1}") for n, c in enumerate(flood)]
    answers, threads = _in_threads(calls)
    try:
        wait_until(lambda: len(answers) == 1, timeout=30, what="every place taken")
        assert answers[0][1].status_code == 429
        ticks.now += REMEMBER_SECONDS
        # Her script's requests in flight, each from the same credentials, all due for the next check at once.
        hers, her_threads = _in_threads([lambda: olga.get("/api/v1/wallet") for _ in range(CHECKS_ADMITTED + 2)])
        threads += her_threads
        wait_until(lambda: people.waiting() == CHECKS_ADMITTED + 1, timeout=30, what="her requests waiting")
        assert hers == []  # none was refused while the flood's checks held every place
    finally:
        held.go.set()
        for thread in threads:
            thread.join(timeout=60)
    assert [a.status_code for _, a in hers] == [200] * (CHECKS_ADMITTED + 2)
