"""Nothing acknowledged is lost: a real `svc serve` is killed with SIGKILL while threads fire notifies and events
at it, then started again on the same data. Every receipt, run and decision it answered 2xx for is there.

What this proves and what it does not: the process dies with no chance to flush or clean up, so an answer
given before the commit reached the database (or a commit kept only in the process) would show up missing.
It does not cut the machine's power: the operating system's page cache survives a killed process, so the
fsync of each commit (SQLite's `synchronous=FULL`, PostgreSQL's own) is relied on, not tested, here.
"""

import pytest
import requests

from conftest import BASIC, CI_SECRET
from load_kit import ENVELOPE, EVENTS, Firing, every_page
from processes import start_service, wait_until

pytestmark = [pytest.mark.process, pytest.mark.both_backends]

ENV = {"SVC_CI_WEBHOOK_SECRET": CI_SECRET, "SVC_BASIC_AUTH": BASIC, "SVC_THREADS": "4"}


def test_every_acknowledged_receipt_and_decision_survives_a_sigkill_mid_load(tmp_path, database_url):
    server, base = start_service(tmp_path, database_url, **ENV)
    try:
        firing = Firing([base], CI_SECRET, notifiers=3, eventers=3, until_unreachable=True).start()
        # Mid-load: the threads keep firing while the process dies under them.
        wait_until(
            lambda: len(firing.acked.receipts) >= 60 and len(firing.acked.decisions) >= 60,
            timeout=60,
            what="load",
        )
        server.proc.kill()
        server.proc.wait(timeout=10)
        acked = firing.stop()
    finally:
        server.stop()
    assert acked.refused == []
    assert acked.unanswered == 6  # each thread stopped at its first request without an answer
    print(f"acknowledged before the kill: {len(acked.receipts)} notifies, {len(acked.decisions)} events")

    again, base = start_service(tmp_path, database_url, **ENV)
    try:
        basic = requests.Session()
        basic.auth = tuple(BASIC.split(":", 1))
        ci = requests.Session()
        ci.headers["X-Svc-CI-Secret"] = CI_SECRET
        timeline = every_page(basic, base + "/api/v1/tickets/WRITING-DAILY/timeline", "entries")
        runs = every_page(ci, base + "/api/v1/agents/runs?agent_id=writing-daily", "runs")
        decisions = every_page(basic, base + "/api/v1/router/decisions", "decisions")

        receipts = {e["id"] for e in timeline if e["kind"] == "writing_report"}
        assert acked.receipts <= receipts, sorted(acked.receipts - receipts)
        assert acked.runs <= {r["id"] for r in runs}, sorted(acked.runs - {r["id"] for r in runs})
        recorded = {d["event_id"]: d["id"] for d in decisions}
        assert {e: recorded.get(e) for e in acked.decisions} == acked.decisions
        # A request that got no answer may or may not have been recorded, but nothing was invented.
        assert len(receipts) <= len(acked.receipts) + 3 and len(runs) == len(receipts)
        assert len(recorded) <= len(acked.decisions) + 3
        # The restarted service still knows each acknowledged event: a redelivery records nothing new.
        event_id = next(iter(acked.decisions))
        redelivered = ci.post(base + EVENTS, json={**ENVELOPE, "id": event_id}, timeout=10)
        assert redelivered.status_code == 200 and redelivered.json()["decision"]["id"] == acked.decisions[event_id]
    finally:
        again.stop()
