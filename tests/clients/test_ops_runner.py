"""`svc ops ...` (the ops runner) against a real `svc serve`."""

import json
import subprocess

import pytest

from conftest import BASIC, CI_SECRET
from processes import SVC, ServiceProcess, free_port, svc_env

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def server(tmp_path_factory, module_database_url):
    folder = tmp_path_factory.mktemp("ops-runner")
    database_url = module_database_url
    port = free_port()
    env = svc_env(
        SVC_DATA_DIR=str(folder / "data"),
        SVC_PORT=str(port),
        DATABASE_URL=database_url,
        SVC_CI_WEBHOOK_SECRET=CI_SECRET,
        SVC_BASIC_AUTH=BASIC,
    )
    process = ServiceProcess(["serve"], env, folder / "serve.log").start()
    base = f"http://127.0.0.1:{port}"
    try:
        process.wait_healthy(base)
        yield base
    finally:
        process.stop()


def ops(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SVC, "ops", *args], env=svc_env(**env), capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("job", "members"),
    [
        ("pulse", {"issues", "posted", "steward", "run"}),
        ("digest", {"message", "posted", "run"}),
        ("slot-steward", {"released", "run"}),
        ("idle-reclaim", {"wiped", "run"}),
    ],
)
def test_each_job_calls_its_endpoint_and_prints_the_answer(server, tmp_path, job, members):
    done = ops(job, SVC_BASE_URL=server, SVC_BASIC_AUTH=BASIC, SVC_DATA_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert set(answer) == members
    assert answer["run"]["details"]["actor"] == BASIC.split(":")[0]
    assert done.stderr.startswith(f"svc ops {job}: ")


def test_the_pulse_passes_post_to_chat_on(server, tmp_path):
    done = ops(
        "pulse", "--post-to-chat", "never", SVC_BASE_URL=server, SVC_BASIC_AUTH=BASIC, SVC_DATA_DIR=str(tmp_path)
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["issues"] and answer["posted"] is False
    assert answer["run"]["details"]["post_to_chat"] == "never"


def test_wrong_credentials_are_refused_with_a_clear_message(server, tmp_path):
    done = ops("pulse", SVC_BASE_URL=server, SVC_BASIC_AUTH="admin:not-the-password", SVC_DATA_DIR=str(tmp_path))
    assert done.returncode == 1
    assert done.stdout == ""
    assert "refused" in done.stderr and "401" in done.stderr and "SVC_BASIC_AUTH" in done.stderr
    assert "not-the-password" not in done.stderr


def test_no_credentials_at_all_stops_before_calling(server, tmp_path):
    done = ops("digest", SVC_BASE_URL=server, SVC_DATA_DIR=str(tmp_path))
    assert done.returncode == 2
    assert "SVC_BASIC_AUTH is not set" in done.stderr


def test_a_service_that_is_not_there_is_a_failure(tmp_path):
    base = f"http://127.0.0.1:{free_port()}"
    done = ops("slot-steward", SVC_BASE_URL=base, SVC_BASIC_AUTH=BASIC, SVC_DATA_DIR=str(tmp_path))
    assert done.returncode == 1
    assert f"cannot reach {base}/api/v1/ops/slot-steward (connection refused)" in done.stderr


def test_an_unknown_job_is_a_usage_error():
    done = ops("reboot")
    assert done.returncode == 2
    assert "invalid choice: 'reboot'" in done.stderr


def test_post_to_chat_is_for_the_pulse_only(server, tmp_path):
    done = ops("digest", "--post-to-chat", "never", SVC_BASE_URL=server, SVC_BASIC_AUTH=BASIC)
    assert done.returncode == 2
    assert "--post-to-chat applies to the pulse only" in done.stderr
