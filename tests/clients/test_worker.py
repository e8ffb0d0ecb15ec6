"""The reference worker (`svc worker`, clients/worker.py) against a local server that speaks the service's three
worker endpoints (tests/servers/dispatch.py): claim, run the command with the job on stdin, heartbeat at a third of
the lease, stop the command when told, send its output as it is, and exit as the contract says."""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clients import worker
from clients.worker import FAILED, NOTHING, OK, USAGE, Backoff, Worker
from contracts.envelope import worker_output_violations

from processes import SVC, svc_env, wait_until
from servers.dispatch import PASSWORD, WORKER, FakeDispatch

ROOT = Path(__file__).resolve().parents[2]
TOY = [sys.executable, str(ROOT / "examples" / "worker" / "toy_worker.py")]


class Pauses:
    """The worker's sleeps, recorded and not slept (the pauses are what is checked, never the time they took)."""

    def __init__(self):
        self.slept: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)


def make(fake: FakeDispatch, command, *, err=None, sleep=None, **kwargs) -> Worker:
    return Worker(
        fake.base,
        WORKER,
        PASSWORD,
        "bay-1",
        command,
        err=err if err is not None else io.StringIO(),
        sleep=sleep or Pauses(),
        **kwargs,
    )


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_claimed_job_runs_the_command_with_the_job_on_stdin_and_its_stdout_is_the_result():
    err = io.StringIO()
    with FakeDispatch() as fake:
        job = fake.queue("PORT-12", "coder")
        code = make(fake, TOY, err=err).run(once=True)
    assert code == OK
    assert fake.claims == [{"worker": WORKER, "body": {"bay": "bay-1"}}]
    ((job_id, body),) = fake.results
    output = json.loads(body)
    assert job_id == job["id"] and output["ticket"] == "PORT-12" and output["branch"] == "svc/port-12"
    assert fake.jobs[job["id"]]["state"] == "succeeded"
    assert PASSWORD not in err.getvalue()
    assert f"claimed job {job['id']} (ticket PORT-12, role coder)" in err.getvalue()


def test_the_command_gets_exactly_the_claimed_job_and_its_output_goes_byte_for_byte(tmp_path):
    seen = tmp_path / "stdin.json"
    echo = python(
        f"import sys; data = sys.stdin.read(); open({str(seen)!r}, 'w').write(data); "
        "import json; job = json.loads(data); "
        "sys.stdout.write(json.dumps({'schema': 'svc.worker-output/v0', 'ticket': job['ticket']['key'], "
        "'role': job['role'], 'status': 'no_changes', 'summary': 'nothing to do'}, indent=1))"
    )
    with FakeDispatch() as fake:
        job = fake.queue("PORT-7", "fixer")
        code = make(fake, echo).run(once=True)
    given = json.loads(seen.read_text())
    assert code == OK and set(given) == set(job) and given["id"] == job["id"]
    assert (given["ticket"]["key"], given["role"], given["bay"]) == ("PORT-7", "fixer", "bay-1")
    assert given["envelope"] == job["envelope"] and given["envelope"]["subject"]["repo"] == "acme/portfolio"
    assert fake.results[0][1].startswith(b'{\n "schema"')  # as the command wrote it, indentation and all


def test_nothing_to_claim_with_once_exits_3_without_running_the_command(tmp_path):
    ran = tmp_path / "ran"
    with FakeDispatch() as fake:
        code = make(fake, python(f"open({str(ran)!r}, 'w')")).run(once=True)
    assert code == NOTHING and not ran.exists() and len(fake.claims) == 1


def test_without_once_the_worker_waits_with_growing_jittered_pauses_until_a_job_comes():
    pauses = Pauses()
    with FakeDispatch() as fake:
        waiting = make(fake, TOY, sleep=pauses, backoff=lambda: Backoff(first=1.0, cap=8.0, rng=lambda: 1.0))

        def on_fourth_look(seconds: float) -> None:
            pauses.slept.append(seconds)
            if len(pauses.slept) == 5:
                fake.queue()

        waiting.sleep = on_fourth_look
        code = waiting.run(max_jobs=1)
    assert code == OK and pauses.slept == [1.0, 2.0, 4.0, 8.0, 8.0]  # doubled, then held at the cap
    assert len(fake.claims) == 6


def test_the_jitter_draws_each_pause_between_half_and_all_of_it():
    draws = iter([0.0, 0.5, 0.999])
    backoff = Backoff(first=2.0, cap=30.0, rng=lambda: next(draws))
    assert [backoff.pause(), backoff.pause(), backoff.pause()] == [1.0, 3.0, pytest.approx(7.996)]
    assert backoff.pause(asked=90) == 30.0  # a Retry-After is kept to the cap too


def test_heartbeats_go_every_third_of_the_lease_while_the_command_runs(tmp_path):
    release = tmp_path / "release"
    # The command runs until the server has seen three heartbeats, then answers: no clock decides when it ends.
    waits = python(
        "import os, sys, time, json\n"
        "job = json.load(sys.stdin)\n"
        f"while not os.path.exists({str(release)!r}): time.sleep(0.02)\n"
        "print(json.dumps({'schema': 'svc.worker-output/v0', 'ticket': job['ticket']['key'], 'role': job['role'],"
        " 'status': 'no_changes', 'summary': 'waited'}))"
    )
    lease = 0.9
    with FakeDispatch(lease_seconds=lease) as fake:
        fake.on_heartbeat = lambda job_id, count: release.touch() if count == 3 else None
        job = fake.queue()
        code = make(fake, waits).run(once=True)
    beats = [at for ident, at in fake.heartbeats if ident == job["id"]]
    assert code == OK and len(beats) == 3
    moments = [fake.claimed_at[job["id"]], *beats]
    # Never sooner than a third of the lease apart (a wait can overrun on a busy machine, never fall short).
    assert all(later - earlier >= lease / 3 * 0.95 for earlier, later in itertools.pairwise(moments))


def test_a_cancel_on_heartbeat_stops_the_command_with_sigterm_and_sends_no_result(tmp_path):
    marker = tmp_path / "terminated"
    long = python(
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (open({str(marker)!r}, 'w').write('TERM'), sys.exit(143)))\n"
        "time.sleep(120)\n"
    )
    err = io.StringIO()
    with FakeDispatch(lease_seconds=0.6) as fake:
        job = fake.queue()
        fake.on_heartbeat = lambda job_id, count: fake.cancel(job_id, "the ticket was cancelled")
        code = make(fake, long, err=err).run(once=True)
    assert code == FAILED and fake.results == []
    assert marker.read_text() == "TERM"
    assert "sent SIGTERM" in err.getvalue() and "SIGKILL" not in err.getvalue()
    assert f"job {job['id']}: stopped (cancelled: the ticket was cancelled); no result sent" in err.getvalue()


def test_a_command_that_ignores_sigterm_gets_sigkill_after_the_grace(tmp_path):
    pid_file = tmp_path / "pid"
    stubborn = python(
        f"import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
    )
    err = io.StringIO()
    with FakeDispatch(lease_seconds=0.6) as fake:
        fake.queue()
        fake.on_heartbeat = lambda job_id, count: fake.cancel(job_id) if count == 2 else None
        code = make(fake, stubborn, err=err, kill_grace=0.3).run(once=True)
    assert code == FAILED and fake.results == []
    assert "still running after 0.3 s: sent SIGKILL" in err.getvalue()
    with pytest.raises(ProcessLookupError):  # gone, and reaped by the worker
        os.kill(int(pid_file.read_text()), 0)


def test_a_409_on_heartbeat_means_the_job_is_no_longer_ours_and_the_command_stops(tmp_path):
    with FakeDispatch(lease_seconds=0.6) as fake:
        fake.queue()
        fake.on_heartbeat = lambda job_id, count: fake.lose(job_id)
        err = io.StringIO()
        code = make(fake, python("import time; time.sleep(120)"), err=err).run(once=True)
    assert code == FAILED and fake.results == [] and "no longer this worker's" in err.getvalue()


def test_heartbeats_go_at_least_every_ten_seconds_whatever_the_lease(tmp_path):
    """`min(lease / 3, 10 s)`: a long lease still hears a cancel within 15 s (here the ten seconds are a tenth)."""
    release = tmp_path / "release"
    waits = python(
        "import os, sys, time, json\n"
        "job = json.load(sys.stdin)\n"
        f"while not os.path.exists({str(release)!r}): time.sleep(0.02)\n"
        "print(json.dumps({'schema': 'svc.worker-output/v0', 'ticket': job['ticket']['key'], 'role': job['role'],"
        " 'status': 'no_changes', 'summary': 'waited'}))"
    )
    with FakeDispatch(lease_seconds=300) as fake:
        fake.on_heartbeat = lambda job_id, count: release.touch() if count == 2 else None
        job = fake.queue()
        code = make(fake, waits, heartbeat_every=0.1).run(once=True)
    beats = [at for ident, at in fake.heartbeats if ident == job["id"]]
    assert code == OK and len(beats) == 2  # a third of the lease would be 100 s: none would have come yet
    assert worker.HEARTBEAT_EVERY == 10.0


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("import sys; sys.stderr.write('starting\\nboom: the tests would not build\\n'); sys.exit(3)", 3),
        ("import sys; sys.stderr.write('it did nothing\\n')", 0),  # exited 0 having printed nothing
    ],
)
def test_a_command_that_crashes_or_prints_nothing_sends_a_failed_result_and_exits_1(code, said):
    err = io.StringIO()
    command = python(code)
    with FakeDispatch() as fake:
        job = fake.queue("PORT-12", "fixer")
        exit_code = make(fake, command, err=err).run(once=True)
    ((job_id, body),) = fake.results
    sent = json.loads(body)
    last = "boom: the tests would not build" if said else "it did nothing"
    assert sent == {
        "schema": "svc.worker-output/v0",
        "ticket": "PORT-12",
        "role": "fixer",
        "status": "failed",
        "summary": f"{sys.executable} exited {said}: {last}",
        "event_id": job["event_id"],
    }
    assert worker_output_violations(sent) == []
    assert exit_code == FAILED and fake.jobs[job_id]["state"] == "failed"
    assert last in err.getvalue()  # the command's standard error still passes through


def test_the_workers_own_words_for_an_output_are_the_contracts():
    from contracts.envelope import OUTPUT_FAILED, OUTPUT_STATUSES, WORKER_OUTPUT_VERSION

    assert worker.OUTPUT_SCHEMA == WORKER_OUTPUT_VERSION
    assert worker.OUTPUT_FAILED == OUTPUT_FAILED and worker.OUTPUT_FAILED in OUTPUT_STATUSES


def test_nothing_to_claim_says_why(tmp_path):
    err = io.StringIO()
    with FakeDispatch() as fake:
        fake.idle_reason = "bay-held"
        assert make(fake, TOY, err=err).run(once=True) == NOTHING
    assert "nothing to claim (bay-held)" in err.getvalue()


def test_an_output_that_is_not_json_is_sent_as_it_is_and_the_gates_422_exits_1():
    err = io.StringIO()
    with FakeDispatch() as fake:
        job = fake.queue()
        code = make(fake, python("print('all done, trust me')"), err=err).run(once=True)
    assert code == FAILED and fake.results == [(job["id"], b"all done, trust me\n")]
    assert fake.jobs[job["id"]]["state"] == "failed"
    assert "result refused by the output gate" in err.getvalue()


def test_an_output_for_another_ticket_is_refused_by_the_gate_and_exits_1():
    # The toy, handed the job with another ticket's key: its output is well formed, but not this job's.
    astray = python(
        "import json, subprocess, sys\n"
        "job = json.load(sys.stdin)\n"
        "job['ticket']['key'] = 'PORT-99'\n"
        f"sys.stdout.write(subprocess.run({TOY!r}, input=json.dumps(job), capture_output=True, text=True).stdout)\n"
    )
    err = io.StringIO()
    with FakeDispatch() as fake:
        job = fake.queue("PORT-12")
        code = make(fake, astray, err=err).run(once=True)
    assert code == FAILED and json.loads(fake.results[0][1])["ticket"] == "PORT-99"
    assert fake.jobs[job["id"]]["state"] == "failed" and "/ticket: names another ticket" in err.getvalue()


def test_an_output_with_status_failed_is_accepted_and_the_job_failed_exits_1():
    failed = python(
        "import json, sys; job = json.load(sys.stdin); print(json.dumps({'schema': 'svc.worker-output/v0', "
        "'ticket': job['ticket']['key'], 'role': job['role'], 'status': 'failed', 'summary': 'tests would not pass'}))"
    )
    with FakeDispatch() as fake:
        job = fake.queue()
        code = make(fake, failed).run(once=True)
    assert code == FAILED and fake.jobs[job["id"]]["state"] == "failed" and len(fake.results) == 1


def test_a_claim_that_meets_503s_is_tried_again_after_retry_after_then_runs():
    pauses = Pauses()
    with FakeDispatch() as fake:
        fake.queue()
        fake.fail(503, times=2, path="/claim", retry_after=4)
        code = make(fake, TOY, sleep=pauses).run(once=True)
    assert code == OK and pauses.slept == [4.0, 4.0] and len(fake.results) == 1


def test_a_claim_that_keeps_failing_gives_up_at_the_deadline_and_exits_1():
    pauses = Pauses()
    err = io.StringIO()
    with FakeDispatch() as fake:
        fake.fail(502, times=100, path="/claim")
        code = make(fake, TOY, sleep=pauses, err=err, deadline=0.0).run(once=True)
    assert code == FAILED and "giving up" in err.getvalue() and fake.results == []


def test_a_result_whose_answer_was_lost_is_read_back_from_the_job():
    with FakeDispatch() as fake:
        job = fake.queue()

        # The first result reaches the service (recorded) but its answer is a 502 from a proxy.
        original = fake._result

        def recorded_then_lost(job_, raw):
            status, headers, body = original(job_, raw)
            if len(fake.results) == 1:
                return 502, {}, {"detail": "bad gateway"}
            return status, headers, body

        fake._result = recorded_then_lost
        code = make(fake, TOY).run(once=True)
    assert code == OK and len(fake.results) == 2 and fake.jobs[job["id"]]["state"] == "succeeded"
    assert [c["method"] for c in fake.calls][-1] == "GET"


@pytest.mark.parametrize(("workers", "others", "status"), [({}, {}, 401), ({}, {WORKER: PASSWORD}, 403)])
def test_refused_credentials_exit_2_with_a_clear_message_and_never_the_password(workers, others, status):
    err = io.StringIO()
    with FakeDispatch(workers=workers, others=others) as fake:
        fake.queue()
        code = make(fake, TOY, err=err).run(once=True)
    assert code == USAGE and fake.results == []
    assert f"claim refused ({status})" in err.getvalue() and "SVC_WORKER_AUTH" in err.getvalue()
    assert PASSWORD not in err.getvalue()


def test_the_toy_workers_output_passes_the_worker_output_contract():
    with FakeDispatch() as fake:
        job = fake.queue("PORT-12", "fixer")
    done = subprocess.run(TOY, input=json.dumps(job), capture_output=True, text=True, timeout=60, check=False)
    output = json.loads(done.stdout)
    assert done.returncode == 0 and worker_output_violations(output) == []
    assert (output["ticket"], output["role"], output["status"]) == ("PORT-12", "fixer", "changes_ready")
    assert output["branch"] == "svc/port-12" and len(output["commits"][0]["sha"]) == 40
    assert output["pull_request"]["title"].startswith("PORT-12: ") and output["files_changed"]


def test_the_toy_worker_refuses_an_input_that_is_not_a_job():
    done = subprocess.run(TOY, input="[]", capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stdout == "" and "not a job" in done.stderr


# -- `svc worker`, the command ------------------------------------------------------------------------------------


def svc_worker(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SVC, "worker", *args], env=svc_env(**env), capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.process
def test_svc_worker_once_runs_a_job_end_to_end_and_exits_0():
    with FakeDispatch() as fake:
        fake.queue()
        done = svc_worker(
            "--bay", "bay-1", "--once", "--", *TOY, SVC_BASE_URL=fake.base, SVC_WORKER_AUTH=f"{WORKER}:{PASSWORD}"
        )
    assert done.returncode == OK, done.stderr
    assert json.loads(fake.results[0][1])["ticket"] == "PORT-12"
    assert PASSWORD not in done.stderr + done.stdout
    assert done.stderr.count("\n") >= 4  # one line per step: start, claim, run, exit, result


@pytest.mark.process
def test_svc_worker_once_with_nothing_to_claim_exits_3():
    with FakeDispatch() as fake:
        done = svc_worker(
            "--bay", "bay-1", "--once", "--", *TOY, SVC_BASE_URL=fake.base, SVC_WORKER_AUTH=f"{WORKER}:{PASSWORD}"
        )
    assert done.returncode == NOTHING and "nothing to claim" in done.stderr and PASSWORD not in done.stderr


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--bay", "bay-1", "--once", "--", "true"], {}, "SVC_WORKER_AUTH is not set"),
        (["--bay", "bay-1", "--once"], {"SVC_WORKER_AUTH": "bay-1:x"}, "no COMMAND"),
    ],
)
def test_svc_worker_without_credentials_or_command_exits_2(args, env, said):
    done = svc_worker(*args, **env)
    assert done.returncode == USAGE and said in done.stderr


@pytest.mark.process
def test_a_worker_told_to_stop_stops_its_command_first(tmp_path):
    marker = tmp_path / "terminated"
    started = tmp_path / "started"
    long = python(
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (open({str(marker)!r}, 'w').write('TERM'), sys.exit(143)))\n"
        f"open({str(started)!r}, 'w')\n"
        "time.sleep(120)\n"
    )
    with FakeDispatch() as fake:
        fake.queue()
        process = subprocess.Popen(
            [SVC, "worker", "--bay", "bay-1", "--", *long],
            env=svc_env(SVC_BASE_URL=fake.base, SVC_WORKER_AUTH=f"{WORKER}:{PASSWORD}"),
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(started.exists, timeout=60, what="the command to start")
        process.terminate()
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + 15 and marker.read_text() == "TERM" and fake.results == []
    assert PASSWORD not in stderr


def test_run_reads_its_environment_and_never_logs_the_password():
    err = io.StringIO()
    with FakeDispatch() as fake:
        fake.queue()
        parser = argparse.ArgumentParser()
        worker.add_arguments(parser)
        args = parser.parse_args(["--bay", "bay-1", "--once", "--", *TOY])
        code = worker.run(args, {"SVC_BASE_URL": fake.base, "SVC_WORKER_AUTH": f"{WORKER}:{PASSWORD}"}, err=err)
    assert code == OK and PASSWORD not in err.getvalue() and f"as {WORKER}" in err.getvalue()


def test_without_once_a_service_out_of_reach_is_waited_for_and_refused_credentials_end_it():
    pauses = Pauses()
    with FakeDispatch() as fake:
        fake.queue()
        fake.fail(503, times=3, path="/claim")
        # deadline 0: each claim gives up at its first 503; the loop waits and claims again.
        code = make(fake, TOY, sleep=pauses, deadline=0.0).run(max_jobs=1)
    assert code == OK and len(pauses.slept) == 3 and len(fake.results) == 1
    with FakeDispatch(workers={}) as fake:
        assert make(fake, TOY).run() == USAGE and len(fake.claims) == 0 and len(fake.calls) == 1
