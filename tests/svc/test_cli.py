"""The `svc` command's own decisions (what its subcommands do is tested through real processes elsewhere), and what
the installed `svc` says when it cannot do what it was asked: a busy port, a mistyped command or option."""

import os
import socket
import subprocess
from importlib.metadata import version

import pytest

from domain.config import Config
from svc.cli import jobs_grace_seconds

from processes import SVC, svc_env


def test_svc_run_gives_the_jobs_process_longer_than_a_bay_wipe_may_take_before_killing_it():
    # After SIGTERM the jobs process finishes the work in hand; a wipe may run for its whole time limit, and a
    # kill before then would leave the wipe command running unwatched.
    for limit in (1.0, 120.0, 3600.0):
        assert jobs_grace_seconds(Config(bay_wipe_timeout=limit)) > limit


def test_a_reader_that_goes_away_early_ends_svc_quietly(tmp_path):
    """`svc outbox | head`: the pipe closes before svc is done writing; no traceback, as with any shell tool."""
    env = svc_env(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", SVC_DATA_DIR=str(tmp_path / "data"))
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    try:
        done = subprocess.run([SVC, "outbox"], stdout=write_end, stderr=subprocess.PIPE, env=env, timeout=60)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr.decode() and "BrokenPipeError" not in done.stderr.decode()
    assert done.returncode == 1


def run_svc(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    values = {"SVC_DATA_DIR": str(tmp_path / "data"), "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", **env}
    return subprocess.run([SVC, *args], env=svc_env(**values), capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("command", ["serve", "run"])
def test_a_second_server_on_a_busy_port_says_so_in_one_line_before_claiming_to_serve(tmp_path, command):
    with socket.socket() as taken:  # what a first `svc serve` holds
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        second = run_svc(tmp_path, command, SVC_PORT=str(port))
        flag = run_svc(tmp_path, command, "--port", str(port))  # the same port from the command line
    assert second.returncode == 2
    assert second.stderr == f"svc {command}: port {port} is in use (another svc?); set SVC_PORT or --port\n"
    assert "serving on" not in second.stdout and "jobs process" not in second.stdout  # nothing was started
    assert flag.returncode == 2
    assert flag.stderr == f"svc {command}: port {port} is in use (another svc?); set SVC_PORT or --port\n"


def test_svc_version_prints_the_installed_version():
    done = subprocess.run([SVC, "--version"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, f"svc {version('svc-delivery')}\n")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["sever"], "svc: error: unknown command 'sever'; did you mean serve?"),
        (["backtst", "--since", "x"], "svc: error: unknown command 'backtst'; did you mean backtest?"),
        (["user", "ad", "alice"], "svc user: error: unknown command 'ad'; did you mean add?"),
        (["frobnicate"], "svc: error: unknown command 'frobnicate'; the commands: serve, run, jobs, migrate,"),
    ],
)
def test_a_mistyped_command_is_told_the_nearest_one(tmp_path, args, said):
    done = run_svc(tmp_path, *args)
    assert done.returncode == 2
    assert said in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("args", "usage", "unknown"),
    [
        (["backup", "--bogus", "copy.sqlite3"], "usage: svc backup [-h] PATH", "--bogus"),
        (["serve", "--prot", "8081"], "usage: svc serve [-h] [--host HOST] [--port PORT]", "--prot 8081"),
        (["user", "add", "alice", "--role", "viewer", "--zzz"], "usage: svc user add [-h] --role", "--zzz"),
    ],
)
def test_an_unknown_option_prints_the_usage_of_its_own_command(tmp_path, args, usage, unknown):
    done = run_svc(tmp_path, *args)
    assert done.returncode == 2
    assert done.stderr.startswith(usage), done.stderr
    assert done.stderr.endswith(f"error: unrecognized arguments: {unknown}\n"), done.stderr


def test_svc_user_add_gives_a_worker_its_bay_and_refuses_a_control_character_in_a_name_or_a_bay(tmp_path):
    def user(*args: str) -> subprocess.CompletedProcess:
        values = {"SVC_DATA_DIR": str(tmp_path / "data"), "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
        return subprocess.run(
            [SVC, "user", *args], env=svc_env(**values), input="pass-word-1\n", capture_output=True, text=True
        )

    added = user("add", "runner", "--role", "worker", "--bay", "bay-9")
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("svc user: added runner (worker, in bay bay-9:")
    assert user("add", "bay-1", "--role", "worker").stdout.startswith("svc user: added bay-1 (worker, in bay bay-1:")
    for refused in (
        ("add", "nl\n", "--role", "worker"),
        ("add", "nl", "--role", "worker", "--bay", "bay-2\n"),
        ("add", "nl", "--role", "worker", "--bay", "bay 2"),
        ("add", "ada", "--role", "viewer", "--bay", "bay-3"),
        ("add", "ada@home", "--role", "worker"),  # a worker named so needs a bay: "@" is no bay's
    ):
        done = user(*refused)
        assert done.returncode == 1 and done.stderr.startswith("svc user: "), (refused, done.stderr)
    listed = user("list").stdout.splitlines()
    assert [line.split()[:3] for line in listed[1:]] == [["bay-1", "worker", "bay-1"], ["runner", "worker", "bay-9"]]
