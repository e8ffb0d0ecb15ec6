"""The `svc` command's own decisions (what its subcommands do is tested through real processes elsewhere)."""

import os
import subprocess

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
