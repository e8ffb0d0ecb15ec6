"""Dispatch across real processes, on both backends.

- Two `svc serve` on one database, six workers claiming at once through both: no job is claimed twice, and never
  more jobs run than the policy's fleet size (on PostgreSQL the claims take turns on an advisory lock; on SQLite the
  one writer makes them).
- A pause and a cancel made through one server hold at the other at once.
- A worker killed mid-job (it stops heartbeating) loses nothing: the jobs process puts the job back within 10 s of
  its lease's end, and it runs again in another bay.
- A forge that is down, and a jobs process restarted meanwhile, lose nothing of the forge writes: once the forge is
  back, the restarted process writes the pull request, once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import requests
from dispatch_kit import WORKER_PASSWORD, output, policy

from storage.db import connection
from storage.models import DispatchJob

from conftest import BASIC, CI_SECRET, PASSWORDS
from events_kit import ALLOWLIST
from processes import ServiceProcess, start_service, svc_env, wait_until
from router_kit import envelope
from servers.forges import GITHUB_TOKEN, FakeGitHub

pytestmark = [pytest.mark.process, pytest.mark.both_backends]

ENV = {"SVC_CI_WEBHOOK_SECRET": CI_SECRET, "SVC_BASIC_AUTH": BASIC, "SVC_THREADS": "8"}
JOBS = 12
FLEET = 3
WORKERS = 6


def people() -> requests.Session:
    session = requests.Session()
    session.auth = tuple(BASIC.split(":", 1))
    return session


def machine(name: str) -> requests.Session:
    session = requests.Session()
    session.auth = (name, WORKER_PASSWORD)
    return session


def add_workers(*names: str) -> None:
    from domain import accounts

    for name in names:
        accounts.add(name, "worker", WORKER_PASSWORD, passwords=PASSWORDS)


def live_board(base: str, keys: list[str], *, fleet_size: int, retry_budget: int = 2) -> list[int]:
    """Initiative, tickets and a live coder rule, then one coder event per ticket: the queued jobs' ids."""
    session = people()
    assert session.post(f"{base}/api/v1/initiatives", json={"id": "portfolio", "name": "P", "stage": "active"}).ok
    for key in keys:
        body = {"key": key, "initiative_id": "portfolio", "title": key, "stage": "queued"}
        assert session.post(f"{base}/api/v1/tickets", json=body).status_code == 201
    current = session.get(f"{base}/api/v1/router/policy")
    document = policy(fleet_size=fleet_size, retry_budget=retry_budget)
    assert document["allowlist"] == sorted(ALLOWLIST)
    changed = session.put(
        f"{base}/api/v1/router/policy",
        json={"policy": document, "reason": "go live", "force": "an end-to-end test"},
        headers={"If-Match": current.headers["ETag"]},
    )
    assert changed.status_code == 200, changed.text
    ids = []
    for key in keys:
        answer = requests.post(
            f"{base}/api/v1/events",
            json=envelope("state_changed", key, at=datetime.now(UTC)),  # fresh when judged
            headers={"X-Svc-CI-Secret": CI_SECRET},
            timeout=30,
        )
        assert answer.status_code == 202, answer.text
        assert answer.json()["decision"]["dispatched"] is True
        ids.append(answer.json()["decision"]["job_id"])
    return ids


def running() -> int:
    with connection():
        return DispatchJob.select().where(DispatchJob.state == "running").count()


def test_claims_racing_through_two_servers_never_share_a_job_nor_exceed_the_fleet(app, tmp_path, database_url):
    names = [f"bay-{n}" for n in range(1, WORKERS + 1)]
    add_workers(*names)
    servers = []
    for name in ("api-a", "api-b"):
        (tmp_path / name).mkdir()
        servers.append(start_service(tmp_path / name, database_url, **ENV))
    bases = [base for _, base in servers]
    claimed: dict[str, list[int]] = {name: [] for name in names}
    most_running = [0]
    failures: list[str] = []
    start = threading.Barrier(WORKERS + 1)
    done = threading.Event()

    def work(n: int, name: str) -> None:
        session = machine(name)
        start.wait()
        idle = 0
        while idle < 20:  # 204 twenty times in a row: the queue is empty (or the fleet full all that while)
            base = bases[(n + len(claimed[name])) % 2]  # alternate between the servers
            answer = session.post(f"{base}/api/v1/dispatch/claim", json={"bay": name}, timeout=30)
            if answer.status_code == 204:
                idle += 1
                time.sleep(0.05)
                continue
            if answer.status_code != 200:
                failures.append(f"{name} claim: {answer.status_code} {answer.text}")
                return
            idle = 0
            job = answer.json()["job"]
            claimed[name].append(job["id"])
            time.sleep(0.05)  # the job runs a little while the others claim
            result = session.post(
                f"{bases[n % 2]}/api/v1/dispatch/jobs/{job['id']}/result", json=output(job, "no_changes"), timeout=30
            )
            if result.status_code != 200:
                failures.append(f"{name} result: {result.status_code} {result.text}")
                return

    def watch() -> None:
        while not done.is_set():
            most_running[0] = max(most_running[0], running())
            time.sleep(0.01)

    try:
        ids = live_board(bases[0], [f"PORT-{n}" for n in range(1, JOBS + 1)], fleet_size=FLEET)
        threads = [threading.Thread(target=work, args=(n, name)) for n, name in enumerate(names)]
        watcher = threading.Thread(target=watch)
        for thread in threads:
            thread.start()
        watcher.start()
        start.wait()
        for thread in threads:
            thread.join(timeout=180)
        done.set()
        watcher.join()
        jobs = {job["id"]: job for job in people().get(f"{bases[1]}/api/v1/dispatch/jobs").json()["jobs"]}
    finally:
        done.set()
        for server, _ in servers:
            server.stop()
    assert failures == []
    every = [job_id for ids_of in claimed.values() for job_id in ids_of]
    assert sorted(every) == sorted(ids)  # every job claimed, none twice
    assert {job["state"] for job in jobs.values()} == {"succeeded"}
    assert all(jobs[job_id]["worker"] == name for name, mine in claimed.items() for job_id in mine)
    assert 1 <= most_running[0] <= FLEET
    assert sum(1 for mine in claimed.values() if mine) >= 2  # the claims did race: several workers got jobs
    print(f"claims by worker: { {name: len(mine) for name, mine in claimed.items()} }; most running {most_running[0]}")


def test_a_pause_and_a_cancel_made_through_one_server_hold_at_the_other(app, tmp_path, database_url):
    """The switch and a job's cancel are rows, not a process's memory: an operator pausing through one API process
    stops the claims that reach another at once, and a job cancelled through one is told to stop by the other."""
    add_workers("bay-1")
    servers = []
    for name in ("api-a", "api-b"):
        (tmp_path / name).mkdir()
        servers.append(start_service(tmp_path / name, database_url, **ENV))
    (_, a), (_, b) = servers
    try:
        ids = live_board(a, ["PORT-1", "PORT-2"], fleet_size=2)
        operator, worker = people(), machine("bay-1")
        paused = operator.put(f"{a}/api/v1/router/dispatch", json={"paused": True, "reason": "the forge is down"})
        assert paused.status_code == 200 and paused.json()["paused"] is True
        assert worker.post(f"{b}/api/v1/dispatch/claim", json={"bay": "bay-1"}).status_code == 204
        assert people().get(f"{b}/api/v1/router/dispatch").json()["reason"] == "the forge is down"
        assert operator.put(f"{a}/api/v1/router/dispatch", json={"paused": False, "reason": "back"}).ok
        claimed = worker.post(f"{b}/api/v1/dispatch/claim", json={"bay": "bay-1"})
        assert claimed.status_code == 200 and claimed.json()["job"]["id"] == ids[0]
        beat = worker.post(f"{b}/api/v1/dispatch/jobs/{ids[0]}/heartbeat", json={})
        assert beat.status_code == 200 and beat.json()["cancel"] is False
        cancelled = operator.post(f"{a}/api/v1/dispatch/jobs/{ids[0]}/cancel", json={"reason": "not this one"})
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
        told = worker.post(f"{b}/api/v1/dispatch/jobs/{ids[0]}/heartbeat", json={})
        assert told.status_code == 200 and told.json()["cancel"] is True
        late = worker.post(f"{b}/api/v1/dispatch/jobs/{ids[0]}/result", json=output(claimed.json()["job"]))
        assert late.status_code == 409  # no longer running: nothing of it reaches the forge
    finally:
        for server, _ in servers:
            server.stop()


# A worker as a team would run one, cut down to what matters here: it claims, then heartbeats until it is killed.
WORKER_SCRIPT = """
import sys, time, requests
base, name, password = sys.argv[1:4]
session = requests.Session()
session.auth = (name, password)
answer = session.post(base + "/api/v1/dispatch/claim", json={"bay": name}, timeout=10)
print(answer.status_code, answer.json()["job"]["id"], flush=True)
job = answer.json()["job"]["id"]
while True:
    session.post(base + f"/api/v1/dispatch/jobs/{job}/heartbeat", json={}, timeout=10)
    time.sleep(0.3)
"""


def test_a_worker_killed_mid_job_loses_nothing_the_job_runs_again(app, tmp_path, database_url):
    add_workers("bay-1", "bay-2")
    env = {**ENV, "SVC_WORKER_LEASE_SECONDS": "2"}
    server, base = start_service(tmp_path, database_url, **env)
    jobs_env = svc_env(SVC_DATA_DIR=str(tmp_path / "data"), DATABASE_URL=database_url, **env)
    jobs = ServiceProcess(["jobs"], jobs_env, tmp_path / "jobs.log").start()
    worker = None
    try:
        (job_id,) = live_board(base, ["PORT-7"], fleet_size=1)
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER_SCRIPT, base, "bay-1", WORKER_PASSWORD],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert worker.stdout.readline().split() == ["200", str(job_id)]

        def beyond_one_lease():  # the worker still heartbeats more than one lease (2 s) after its claim
            job = people().get(f"{base}/api/v1/dispatch/jobs/{job_id}").json()
            since = datetime.fromisoformat(job["heartbeat_at"]) - datetime.fromisoformat(job["claimed_at"])
            return job if since > timedelta(seconds=2.5) else None

        job = wait_until(beyond_one_lease, timeout=30, interval=0.2, what="a heartbeat a lease after the claim")
        assert (job["state"], job["attempts"], job["bay"]) == ("running", 0, "bay-1")
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        # The lease runs out 2 s after the last heartbeat, and the reaper looks every 2 s (how soon, by the clock:
        # tests/jobs/test_lease_reaper.py); the wait here only bounds a hang.
        wait_until(
            lambda: people().get(f"{base}/api/v1/dispatch/jobs/{job_id}").json()["state"] == "queued",
            timeout=30,
            interval=0.2,
            what="the jobs process to put the job back",
        )
        job = people().get(f"{base}/api/v1/dispatch/jobs/{job_id}").json()
        assert (job["attempts"], job["bay"]) == (1, None)
        again = machine("bay-2").post(f"{base}/api/v1/dispatch/claim", json={"bay": "bay-2"})
        assert again.status_code == 200 and again.json()["job"]["id"] == job_id
        ticket = people().get(f"{base}/api/v1/tickets/PORT-7").json()
        assert ticket["assigned_slot"] == "bay-2"
        assert [e["kind"] for e in ticket["timeline"][:3]] == ["job_claimed", "job_requeued", "job_claimed"]
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
        jobs.stop()
        server.stop()
    assert jobs.proc.returncode == 0


def test_the_forge_writes_survive_an_outage_of_the_forge_and_a_restart_of_the_jobs_process(app, tmp_path, database_url):
    add_workers("bay-1")
    with FakeGitHub() as forge:
        forge.add_repo("acme/portfolio")
        forge.fail(500, times=10**6)  # the forge is down until told otherwise
        env = {**ENV, "SVC_GITHUB_API_URL": forge.url, "SVC_GITHUB_TOKEN": GITHUB_TOKEN}
        server, base = start_service(tmp_path, database_url, **env)
        jobs_env = svc_env(SVC_DATA_DIR=str(tmp_path / "data"), DATABASE_URL=database_url, **env)
        first = ServiceProcess(["jobs"], jobs_env, tmp_path / "jobs-1.log").start()
        second = None
        try:
            session = people()
            session.post(f"{base}/api/v1/initiatives", json={"id": "portfolio", "name": "P", "stage": "active"})
            ticket = {"key": "PORT-7", "initiative_id": "portfolio", "title": "PORT-7", "stage": "ci"}
            assert session.post(f"{base}/api/v1/tickets", json=ticket).status_code == 201
            current = session.get(f"{base}/api/v1/router/policy")
            changed = session.put(
                f"{base}/api/v1/router/policy",
                json={"policy": policy(live=("fixer",)), "reason": "go live", "force": "an end-to-end test"},
                headers={"If-Match": current.headers["ETag"]},
            )
            assert changed.status_code == 200, changed.text
            event = envelope("pipeline_failed", "PORT-7", at=datetime.now(UTC))
            event["subject"]["repo"] = "acme/portfolio"
            routed = requests.post(
                f"{base}/api/v1/events", json=event, headers={"X-Svc-CI-Secret": CI_SECRET}, timeout=30
            )
            assert routed.json()["decision"]["dispatched"] is True
            bay = machine("bay-1")
            job = bay.post(f"{base}/api/v1/dispatch/claim", json={"bay": "bay-1"}, timeout=30).json()["job"]
            done = bay.post(f"{base}/api/v1/dispatch/jobs/{job['id']}/result", json=output(job), timeout=30)
            assert done.status_code == 200, done.text
            wait_until(lambda: len(forge.calls) >= 1, timeout=30, what="a first attempt at the forge")
            assert first.stop() == 0  # the jobs process goes away with the forge still down
            with forge.lock:
                forge.scripted.clear()  # the forge is back
            assert forge.pull_requests("acme/portfolio") == []
            second = ServiceProcess(["jobs"], jobs_env, tmp_path / "jobs-2.log").start()
            wait_until(
                lambda: session.get(f"{base}/api/v1/dispatch/jobs/{job['id']}").json()["forge"]["comment"],
                timeout=60,
                interval=0.2,
                what="the restarted jobs process to write the pull request and its comment",
            )
            ticket = session.get(f"{base}/api/v1/tickets/PORT-7").json()
        finally:
            for process in (first, second):
                if process is not None:
                    process.stop()
            server.stop()
        (pull,) = forge.pull_requests("acme/portfolio")
        assert (ticket["link"], ticket["stage"], ticket["waiting_on"]) == (pull["html_url"], "ci", "ci")
        assert len(forge.comments) == 1
