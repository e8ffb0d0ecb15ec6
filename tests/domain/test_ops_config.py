"""The variables the ops agents add: the staging CA file, who schedules the ops agents, the jobs clock offset."""

from datetime import timedelta
from pathlib import Path

import pytest

from domain.clock import shifted
from domain.config import Config, ConfigError

from fakes import FakeClock


def test_defaults():
    config = Config.from_env({})
    assert config.ops_scheduler == "jobs"
    assert config.jobs_clock_offset == 0.0
    assert config.staging_ca_file is None


def test_values_are_read(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    config = Config.from_env(
        {"SVC_OPS_SCHEDULER": "external", "SVC_JOBS_CLOCK_OFFSET": "-3600.5", "SVC_STAGING_CA_FILE": str(ca)}
    )
    assert config.ops_scheduler == "external"
    assert config.jobs_clock_offset == -3600.5
    assert config.staging_ca_file == Path(ca)


def test_bad_values_are_named(tmp_path):
    with pytest.raises(ConfigError) as caught:
        Config.from_env(
            {
                "SVC_OPS_SCHEDULER": "cron",
                "SVC_JOBS_CLOCK_OFFSET": "tomorrow",
                "SVC_STAGING_CA_FILE": str(tmp_path / "missing.pem"),
            }
        )
    named = {problem.split(":", 1)[0] for problem in caught.value.problems}
    assert named == {"SVC_OPS_SCHEDULER", "SVC_JOBS_CLOCK_OFFSET", "SVC_STAGING_CA_FILE"}


def test_a_shifted_clock_runs_ahead_by_the_offset():
    base = FakeClock()
    clock = shifted(90, base)
    assert clock() - base() == timedelta(seconds=90)
    base.advance(seconds=5)
    assert clock() - base() == timedelta(seconds=90)
    assert shifted(0, base) is base
