"""Scale-out: two `svc serve` and two `svc jobs` processes on one database, under concurrent notifies, events
and moves of one generic ticket, from threads spread over both servers.

- no lost update: every acknowledged notify has its receipt and nothing else does; each ticket's timeline is
  one unbroken chain (each entry starts where the one before ended) that ends at the ticket's stage;
- every acknowledged event has its decision, and every board event is routed exactly once;
- the daily pulse, due as the jobs processes start, runs once between them;
- `/metrics` agrees: request counters are per process (their sum is what was acknowledged), the database's
  figures are the same on both.

It runs on both backends. PostgreSQL is what several API processes are meant for: there the two servers race
for the same rows, and take turns on a row lock (`SELECT ... FOR UPDATE`) before the compare-and-swap, so a
move that lost the race re-reads the ticket and answers 409 when its move is no longer allowed. On SQLite the
processes share one file, and its write lock makes them take turns.
"""

import itertools
import json
import threading
from collections import Counter

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from storage import runs
from storage.db import connection
from storage.models import OutboxMessage, RouterDecision, Ticket, TimelineEntry

from conftest import BASIC, CI_SECRET
from load_kit import Firing
from processes import ServiceProcess, last_due, rehearsal_offset, start_service, svc_env, wait_until

pytestmark = [pytest.mark.process, pytest.mark.both_backends]

READY = "jobs process ready: first scheduling pass done"
ENV = {"SVC_CI_WEBHOOK_SECRET": CI_SECRET, "SVC_BASIC_AUTH": BASIC, "SVC_THREADS": "4"}
NEXT_STAGE = {"queued": "execute", "execute": "ci", "ci": "execute"}


def jobs_process(tmp_path, database_url, name: str) -> ServiceProcess:
    # Both rehearse the most recent 08:00 (a past one): their schedules read it as due, while the outbox they
    # drain keeps real time, so the board events the servers queue now are routed all the same.
    env = svc_env(
        SVC_DATA_DIR=str(tmp_path / name),
        DATABASE_URL=database_url,
        SVC_JOBS_CLOCK_OFFSET=rehearsal_offset(last_due("0 8 * * *")),
        **ENV,
    )
    return ServiceProcess(["jobs"], env, tmp_path / f"{name}.log").start()


class Mover:
    """A thread moving one ticket along `NEXT_STAGE` through one server; a move that lost the race is a 409."""

    def __init__(self, base: str, key: str):
        self.base, self.key = base, key
        self.acked: list[str] = []  # the stage of each acknowledged move (it may have started elsewhere)
        self.conflicts = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        session = requests.Session()
        session.auth = tuple(BASIC.split(":", 1))
        while not self.stop.is_set():
            stage = session.get(f"{self.base}/api/v1/tickets/{self.key}", timeout=10).json()["stage"]
            answer = session.post(
                f"{self.base}/api/v1/tickets/{self.key}/move", json={"to": NEXT_STAGE[stage]}, timeout=10
            )
            if answer.status_code == 200:
                self.acked.append(NEXT_STAGE[stage])
            else:
                assert answer.status_code == 409, answer.text
                self.conflicts += 1


def chain_of(key: str) -> tuple[list[TimelineEntry], str]:
    with connection():
        entries = list(TimelineEntry.select().where(TimelineEntry.ticket == key).order_by(TimelineEntry.id))
        stage = Ticket.get_by_id(key).stage
    return entries, stage


def assert_one_unbroken_chain(entries: list[TimelineEntry], stage: str) -> None:
    moves = [e for e in entries if e.data and "to" in e.data]
    for before, after in itertools.pairwise(moves):
        assert after.data["from"] == before.data["to"], (before.id, before.data, after.id, after.data)
    assert moves[-1].data["to"] == stage


def scrape(base: str) -> dict[str, list]:
    text = requests.get(base + "/metrics", auth=tuple(BASIC.split(":", 1)), timeout=10).text
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def sample(families, family: str, **labels) -> float:
    return sum(s.value for s in families[family] if all(s.labels.get(k) == v for k, v in labels.items()))


def test_two_servers_and_two_jobs_processes_on_one_database_lose_nothing(app, tmp_path, database_url):
    for name in ("api-a", "api-b"):
        (tmp_path / name).mkdir()
    servers = [start_service(tmp_path / name, database_url, **ENV) for name in ("api-a", "api-b")]
    bases = [base for _, base in servers]
    workers: list[ServiceProcess] = []
    try:
        basic = requests.Session()
        basic.auth = tuple(BASIC.split(":", 1))
        assert basic.post(bases[0] + "/api/v1/initiatives", json={"id": "port", "name": "Port"}).status_code == 201
        ticket = {"key": "PORT-1", "initiative_id": "port", "title": "Login", "stage": "queued"}
        assert basic.post(bases[1] + "/api/v1/tickets", json=ticket).status_code == 201
        workers = [jobs_process(tmp_path, database_url, name) for name in ("jobs-a", "jobs-b")]

        firing = Firing(bases, CI_SECRET, notifiers=4, eventers=2).start()
        movers = [Mover(base, "PORT-1") for base in bases]
        for mover in movers:
            mover.thread.start()
        wait_until(
            lambda: (
                len(firing.acked.receipts) >= 80
                and len(firing.acked.decisions) >= 40
                and sum(len(m.acked) for m in movers) >= 30
            ),
            timeout=120,
            what="the load",
        )
        for mover in movers:
            mover.stop.set()
            mover.thread.join(timeout=30)
        acked = firing.stop()
        wait_until(lambda: all(READY in w.output() for w in workers), what="both jobs processes' first pass")
        wait_until(
            lambda: sample(scrape(bases[0]), "svc_outbox_pending_messages", kind="route_event") == 0,
            timeout=60,
            what="the jobs processes to route every board event",
        )
        metrics = [scrape(base) for base in bases]
    finally:
        for worker in workers:
            worker.stop()
        for server, _ in servers:
            server.stop()
    assert [w.proc.returncode for w in workers] == [0, 0]
    assert acked.unanswered == 0 and set(acked.refused) <= {409}, acked.refused

    # Writing: one receipt per acknowledged notify, no more; one unbroken chain on WRITING-DAILY.
    writing, writing_stage = chain_of("WRITING-DAILY")
    assert {e.id for e in writing if e.kind == "writing_report"} == acked.receipts
    assert_one_unbroken_chain(writing, writing_stage)
    # The generic ticket: one entry per acknowledged move, in one chain ending at its stage.
    timeline, stage = chain_of("PORT-1")
    moved = [(e.data["from"], e.data["to"]) for e in timeline if e.kind != "created"]
    assert Counter(to for _, to in moved) == Counter(to for mover in movers for to in mover.acked)
    assert_one_unbroken_chain(timeline, stage)

    with connection():
        decisions = list(RouterDecision.select())
        routed = OutboxMessage.select().where(OutboxMessage.kind == "route_event")
        assert {m.status for m in routed} == {"sent"}
        board_events = routed.count()
    # Events: every acknowledged one has its decision; every board event was routed once.
    by_event = {d.event_id: d.id for d in decisions}
    assert {e: by_event.get(e) for e in acked.decisions} == acked.decisions
    svc_decisions = [d for d in decisions if d.source == "svc"]
    assert len(svc_decisions) == len({d.event_id for d in svc_decisions}) == board_events
    # The pulse, due as both jobs processes started, ran once, in one of them.
    with connection():
        assert len(runs.latest("ops-daily-pulse", 10)) == 1
    starts = [
        sum(
            1
            for line in w.output().splitlines()
            if line.startswith("{")
            and json.loads(line)["message"] == "scheduled run starting"
            and json.loads(line).get("agent_id") == "ops-daily-pulse"
        )
        for w in workers
    ]
    assert sorted(starts) == [0, 1]

    # Metrics: requests are counted per process, the database's figures are the same on both.
    notified = [
        sample(m, "svc_http_requests", method="POST", route="/api/v1/agents/writing/notify", status="2xx")
        for m in metrics
    ]
    assert all(n > 0 for n in notified) and sum(notified) == len(acked.receipts)
    totals = [sample(m, "svc_router_decisions") for m in metrics]
    assert totals == [len(decisions), len(decisions)]

    assert sum(m.conflicts for m in movers) > 0  # the movers did race (on both backends, every run so far)
    print(
        f"acknowledged: {len(acked.receipts)} notifies, {len(acked.decisions)} events, "
        f"{sum(len(m.acked) for m in movers)} moves ({sum(m.conflicts for m in movers)} lost a race: 409); "
        f"{board_events} board events routed"
    )
