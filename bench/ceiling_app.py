"""The ceiling: the least a notify and an event can cost while doing everything the service must do for them.

The floor (`floor_app.py`) is the least a durable write costs on this stack. The service owes more than that
for each request, whatever its code looks like: its own schema (the indexes the board's reads need), the
statements a notify or an event must run on it, the credentials, the schema check, a JSON access line and the
answer as the contract documents it. This app does exactly those, as directly as Python allows: no ORM, no
middleware chain, no layers, one function per request on the request thread and one per unit on a group-commit
writer thread (the floor's). Neither the service nor any code could be faster than this while keeping them;
`make bench` measures it beside the floor, and the distance from here to the service is the design's own cost.

What it keeps, per request:
- the CI secret, compared in constant time; a request id; one JSON access line (request id, method, route,
  status, duration, client) through `logging`; the request counted and timed for `/metrics` (the service's own
  `RequestMetrics`);
- the body read and parsed with `json` (exact big integers, as the service), validated by the contract's own
  schema, compiled by jsonschema-rs;
- notify: the move from the writing ticket's machine (its derived table, `machines.writing_ticket`), the words
  (`domain.writing`'s pure functions), and on the service's schema the service's five statements (the outbox
  row, the run, the compare-and-swap of the ticket setting only what changes, the receipt, the automation
  setting that Needs-you reads); the answer: the ticket, the receipt, the run and the chat, as documented;
- events: the duplicate check, the gates' four reads (ticket, wallet, slots held by others, fixer dispatches of
  the last day), the decision with its gates, envelope, policy and facts, its scorecard entry and the accepted
  id; the answer: the event id and the decision, as documented.

    python bench/ceiling_app.py PORT THREADS DATABASE LOG CI_SECRET
"""

from __future__ import annotations

import _thread
import hmac
import itertools
import json
import logging
import queue
import sqlite3
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import falcon
import orjson
import waitress
from prometheus_client import CollectorRegistry

import contracts
from api.prometheus import RequestMetrics
from domain import writing
from machines import stages, writing_ticket

KEY = "WRITING-DAILY"

INSERT_OUTBOX = (
    'INSERT INTO "outbox_message" ("kind", "payload", "status", "attempts", "next_attempt_at", "created_at", '
    "\"updated_at\") VALUES ('chat', ?, 'pending', 0, ?, ?, ?)"
)
INSERT_RUN = (
    'INSERT INTO "agent_run" ("agent_id", "status", "ok", "started_at", "finished_at", "summary", "details") '
    "VALUES ('writing-daily', ?, ?, ?, ?, ?, ?)"
)
SWAP = 'UPDATE "ticket" SET {sets}, "updated_at" = ?, "version" = ? WHERE "key" = ? AND "stage" = ? AND "version" = ?'
INSERT_RECEIPT = (
    'INSERT INTO "timeline_entry" ("ticket_key", "at", "kind", "summary", "data") '
    "VALUES ('WRITING-DAILY', ?, 'writing_report', ?, ?)"
)
SETTING = 'SELECT "value" FROM "setting" WHERE "key" = \'writing.automation\''
TICKET = 'SELECT * FROM "ticket" WHERE "key" = ?'
FIRST = (
    'INSERT OR IGNORE INTO "initiative" ("id", "name", "stage", "created_at", "updated_at") '
    "VALUES ('writing', 'Writing', 'active', ?, ?)",
    'INSERT OR IGNORE INTO "ticket" ("key", "initiative_id", "title", "stage", "needs_you", '
    '"version", "stage_changed_at", "created_at", "updated_at") '
    "VALUES ('WRITING-DAILY', 'writing', 'Daily writing: one article per calendar day', 'agreement', 0, 1, ?, ?, ?)",
)
COUNT = (
    'INSERT INTO "stage_count" ("stage", "tickets") VALUES (?, ?) '
    'ON CONFLICT ("stage") DO UPDATE SET "tickets" = "stage_count"."tickets" + excluded."tickets"'
)

SEEN = 'SELECT "decision_id" FROM "accepted_event" WHERE "event_id" = ?'
STATE = (
    'SELECT t."stage", t."initiative_id", i."stage" FROM "ticket" AS t JOIN "initiative" AS i ON i."id" = '
    't."initiative_id" WHERE t."key" = ?'
)
WALLET = 'SELECT "locked" FROM "wallet" WHERE "id" = 1'
FLEET = (
    'SELECT COUNT(*) FROM "slot_claim" AS c JOIN "ticket" AS t ON t."key" = c."ticket_key" '
    "WHERE t.\"stage\" IN ('execute', 'ci') AND c.\"ticket_key\" <> ?"
)
RETRIES = (
    'SELECT COUNT(*) FROM "router_decision" WHERE "subject_id" = ? AND "role" = \'fixer\' '
    'AND "outcome" = \'would_dispatch\' AND "evaluated_at" >= ?'
)
INSERT_DECISION = (
    'INSERT INTO "router_decision" ("event_id", "evaluated_at", "mode", "source", "kind", "subject_id", "outcome", '
    '"role", "gates", "envelope", "errors", "policy", "facts", "dispatched") VALUES (?, ?, \'shadow\', ?, ?, ?, ?, ?, '
    "?, ?, NULL, ?, ?, 0)"
)
INSERT_SCORECARD = (
    'INSERT INTO "scorecard_entry" ("decision_id", "subject_id", "role", "outcome", "failed_gates", "evaluated_at") '
    "VALUES (?, ?, ?, ?, ?, ?)"
)
INSERT_ACCEPTED = 'INSERT INTO "accepted_event" ("event_id", "decision_id", "received_at") VALUES (?, ?, ?)'
POLICY = {"version": "e5daf8a0fd5e", "allowlist": [], "retry_budget": 2, "fleet_size": 1}
ROLES = {"pipeline_failed": "fixer"}


def stored(moment: datetime) -> str:
    """A UTC moment as the service's schema stores it."""
    return moment.replace(tzinfo=None).isoformat(" ", "microseconds")


def shown(text: str | None) -> str | None:
    """A stored moment as the contract shows it."""
    return None if text is None else text.replace(" ", "T") + "Z"


class Writer:
    """The floor's writer: one thread, one connection; runs the waiting units, commits once, wakes their requests."""

    def __init__(self, path: str):
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute("PRAGMA foreign_keys=ON")
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="ceiling-writer", daemon=True).start()

    def submit(self, unit, *args):
        woken = _thread.allocate_lock()
        woken.acquire()
        job = [unit, args, woken, None]
        self.queue.put(job)
        woken.acquire()
        return job[3]

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
            for n, job in enumerate(batch):
                # As the service's writer: every unit after the first in a savepoint, so a failure takes back only
                # itself (the first, alone in the transaction, fails with all of it and is begun again).
                if n:
                    execute("SAVEPOINT unit")
                try:
                    job[3] = job[0](execute, *job[1])
                except Exception as error:  # the request answers it
                    job[3] = error
                    execute("ROLLBACK TO unit" if n else "ROLLBACK")
                    if not n:
                        execute("BEGIN IMMEDIATE")
                if n:
                    execute("RELEASE unit")
            execute("COMMIT")
            for job in batch:
                job[2].release()


class Units:
    """What runs on the writer: one function per unit, the statements written out."""

    def __init__(self, writer: Writer):
        now = stored(datetime.now(UTC))
        for statement in FIRST:  # the writing ticket as the service's first notify makes it
            writer.connection.execute(statement, (now,) * statement.count("?"))
        cursor = writer.connection.execute(TICKET, (KEY,))
        self.ticket = dict(zip([c[0] for c in cursor.description], cursor.fetchone(), strict=True))
        self.moves = writing_ticket.transitions()

    # -- on the writer --------------------------------------------------------------------------------------------

    def notify(self, execute, body: dict) -> tuple[str, bytes]:
        status, missing, items = body["status"], body.get("missing"), body.get("items") or []
        move = writing_ticket.notify_move(status)
        row = self.ticket
        before = row["stage"]
        now = stored(datetime.now(UTC))
        chat = "queued" if move.chat else "none"
        if move.chat:
            payload = {"content": writing.chat_message(status, missing, items, None, title=None), "source": status}
            execute(INSERT_OUTBOX, (orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode(), now, now, now))
        details = {"trigger": "notify", "actor": "ci", "missing": missing, "items": items, "chat": chat}
        ok = not writing_ticket.FAILURE_STATUS.match(status)
        summary = writing.run_summary(status, missing, len(items))
        run_id = execute(
            INSERT_RUN, (status, ok, now, now, summary, orjson.dumps(details, option=orjson.OPT_SORT_KEYS).decode())
        ).lastrowid
        moved = self.moves[(before, move.event)]
        changes = {"stage": moved.stage, "waiting_on": moved.waiting_on}
        changes["needs_you"] = stages.needs_you(moved.stage, moved.waiting_on)
        sets = {name: value for name, value in changes.items() if row[name] != value}
        if moved.stage != before:
            sets["stage_changed_at"] = now
            for stage, delta in sorted([(before, -1), (moved.stage, +1)]):
                execute(COUNT, (stage, delta))
        version = row["version"] + 1
        statement = SWAP.format(sets=", ".join([f'"{name}" = ?' for name in sets] or ['"link" = "link"']))
        swapped = execute(statement, (*sets.values(), now, version, KEY, before, row["version"])).rowcount
        if swapped != 1:
            raise RuntimeError("the writing ticket changed behind the ceiling's back")
        data = {
            "from": before,
            "to": moved.stage,
            "waiting_on": moved.waiting_on,
            "actor": "ci",
            "event": move.event,
            "status": status,
            "missing": missing,
            "items": len(items),
            "run": run_id,
            "chat": chat,
        }
        text = writing.receipt_summary(status, "ci", before, move, missing)
        receipt = execute(
            INSERT_RECEIPT, (now, text, orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode())
        ).lastrowid
        row.update(sets, updated_at=now, version=version)  # every statement went through: the row as stored
        setting = execute(SETTING).fetchone() if row["needs_you"] else None
        enabled = setting is None or json.loads(setting[0])["enabled"]
        at = shown(now)
        ticket = {
            "key": KEY,
            "initiative_id": row["initiative_id"],
            "title": row["title"],
            "stage": row["stage"],
            "waiting_on": row["waiting_on"],
            "tracker_issue_id": row["tracker_issue_id"],
            "assigned_slot": row["assigned_slot"],
            "link": row["link"],
            "needs_you": bool(row["needs_you"] and enabled),
            "stage_changed_at": shown(row["stage_changed_at"]),
            "created_at": shown(row["created_at"]),
            "updated_at": at,
        }
        return "200 OK", orjson.dumps(
            {
                "ticket": ticket,
                "receipt": {"id": receipt, "at": at, "kind": "writing_report", "summary": text, "data": data},
                "run": {
                    "id": run_id,
                    "agent_id": "writing-daily",
                    "status": status,
                    "ok": ok,
                    "started_at": at,
                    "finished_at": at,
                    "summary": summary,
                    "details": details,
                },
                "chat": chat,
            }
        )

    def event(self, execute, envelope: dict) -> tuple[str, bytes]:
        event_id = envelope["id"]
        if execute(SEEN, (event_id,)).fetchone() is not None:
            return "200 OK", orjson.dumps({"event_id": event_id, "replayed": True})
        moment = datetime.now(UTC)
        now = stored(moment)
        subject = envelope["subject"]["id"]
        kind = envelope["transition"]["kind"]
        role = ROLES.get(kind) or envelope["dispatch_hints"].get("suggested_role")
        state = execute(STATE, (subject,)).fetchone()
        stage, initiative_id, initiative_stage = state if state is not None else (None, None, None)
        locked = bool(execute(WALLET).fetchone()[0])
        others = execute(FLEET, (subject,)).fetchone()[0]
        dispatches = execute(RETRIES, (subject, stored(moment - timedelta(days=1)))).fetchone()[0]
        actor = envelope["actor"]["id"]
        gates = [
            {
                "gate": "authorization",
                "passed": actor in POLICY["allowlist"],
                "reason": f"actor {actor} is not on the policy's allowlist",
            },
            {
                "gate": "agreement",
                "passed": initiative_stage in ("active", "done"),
                "reason": f"the initiative is {initiative_stage}"
                if initiative_stage
                else "no initiative is known for the subject",
            },
            {"gate": "budget", "passed": not locked, "reason": "the wallet is not locked"},
            {
                "gate": "fleet",
                "passed": others < 1,
                "reason": f"{others} other ticket(s) hold a slot in execute or ci; fleet size 1",
            },
            {"gate": "human_gate", "passed": stage not in ("human_test", "human_merge"), "reason": "no human gate"},
            {
                "gate": "retry_budget",
                "passed": dispatches < 2,
                "reason": f"{dispatches} of 2 fixer dispatches used in the last day",
            },
        ]
        failed = [gate["gate"] for gate in gates if not gate["passed"]]
        outcome = "blocked" if failed else "would_dispatch"
        facts = {
            "ticket_stage": stage,
            "ticket_initiative_id": initiative_id,
            "initiative_stage": initiative_stage,
            "wallet_locked": locked,
            "slots_held_by_others": others,
            "fixer_dispatches": dispatches,
        }
        decision_id = execute(
            INSERT_DECISION,
            (
                event_id,
                now,
                envelope["source"],
                kind,
                subject,
                outcome,
                role,
                orjson.dumps(gates).decode(),
                json.dumps(envelope),
                orjson.dumps(POLICY).decode(),
                orjson.dumps(facts).decode(),
            ),
        ).lastrowid
        execute(INSERT_SCORECARD, (decision_id, subject, role, outcome, ",".join(failed), now))
        execute(INSERT_ACCEPTED, (event_id, decision_id, now))
        decision = {
            "id": decision_id,
            "event_id": event_id,
            "evaluated_at": shown(now),
            "mode": "shadow",
            "source": envelope["source"],
            "kind": kind,
            "subject_id": subject,
            "outcome": outcome,
            "role": role,
            "gates": gates,
            "dispatched": False,
            "envelope": envelope,
            "policy": POLICY,
            "facts": facts,
        }
        return "202 Accepted", orjson.dumps({"event_id": event_id, "decision": decision})


class Guarded:
    """The CI secret, compared in constant time; the body read, parsed with `json` and checked by its contract."""

    def __init__(self, writer: Writer, unit, secret: str, contract: str):
        self.writer = writer
        self.unit = unit
        self.secret = secret.encode()
        self.check = contracts.compiled(contract).is_valid

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        if not hmac.compare_digest((req.get_header("X-Svc-CI-Secret") or "").encode(), self.secret):
            raise falcon.HTTPUnauthorized(title="credentials")
        document = json.loads(req.bounded_stream.read())
        if not self.check(document):
            raise falcon.HTTPBadRequest(title="schema")
        result = self.writer.submit(self.unit, document)
        if isinstance(result, Exception):
            raise result
        resp.status, resp.data = result
        resp.content_type = falcon.MEDIA_JSON


class AccessLog:
    """A request id, returned; one JSON access line per request, as the service writes one."""

    def __init__(self, log: logging.Logger):
        self.log = log
        self.metrics = RequestMetrics(CollectorRegistry())
        self.next_id = itertools.count(1).__next__

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.request_id = f"c0ffee0123456789{self.next_id():016x}"
        req.context.started = time.perf_counter()

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        resp.set_header("X-Request-Id", req.context.request_id)
        elapsed = time.perf_counter() - req.context.started
        route = req.uri_template or "unmatched"
        self.metrics(req.method, route, resp.status_code, elapsed)
        line = {
            "at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": "info",
            "logger": "svc.access",
            "message": "request",
            "request_id": req.context.request_id,
            "method": req.method,
            "route": route,
            "status": resp.status_code,
            "duration_ms": round(elapsed * 1000, 2),
            "client": req.remote_addr,
        }
        self.log.info(orjson.dumps(line).decode())


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.data = b'{"ok":true}'


def create_app(database: str, log_path: str, secret: str) -> falcon.App:
    log = logging.getLogger("ceiling.access")
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    # As the service configures logging: no caller, thread or process looked up per record.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    writer = Writer(database)
    units = Units(writer)
    app = falcon.App(middleware=[AccessLog(log)])
    app.add_route("/ceiling/notify", Guarded(writer, units.notify, secret, "writing-notify.json"))
    app.add_route("/ceiling/events", Guarded(writer, units.event, secret, "normalized-event.json"))
    app.add_route("/", Health())
    return app


if __name__ == "__main__":
    port, threads, database, log_path, secret = sys.argv[1:6]
    waitress.serve(
        create_app(database, log_path, secret),
        host="127.0.0.1",
        port=int(port),
        threads=int(threads),
        ident="ceiling",
        _quiet=True,
    )
