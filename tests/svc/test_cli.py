"""The `svc` command's own decisions (what its subcommands do is tested through real processes elsewhere)."""

from domain.config import Config
from svc.cli import jobs_grace_seconds


def test_svc_run_gives_the_jobs_process_longer_than_a_bay_wipe_may_take_before_killing_it():
    # After SIGTERM the jobs process finishes the work in hand; a wipe may run for its whole time limit, and a
    # kill before then would leave the wipe command running unwatched.
    for limit in (1.0, 120.0, 3600.0):
        assert jobs_grace_seconds(Config(bay_wipe_timeout=limit)) > limit
