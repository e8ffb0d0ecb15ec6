"""The jobs process's lease reaper: a running dispatch job whose lease ran out is back in the queue within seconds,
on the process's own clock (a schedule rehearsal moves nothing of it)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from dispatch_kit import board, claim, make_job, worker

from jobs import assembly

from router_kit import allowlisted

pytestmark = pytest.mark.both_backends


def test_the_reaper_is_a_worker_of_the_jobs_process_looking_every_few_seconds(config, clock):
    process = assembly.build(config, clock, schedule_clock=lambda: clock() - timedelta(days=300))
    (reaper,) = [w for w in process.workers() if w.name == "lease reaper"]
    assert reaper.every <= 5  # with the lease's end, within the contract's 10 s


def test_a_step_of_the_reaper_puts_back_a_job_whose_lease_ran_out_and_no_other(
    app_factory, config_factory, config, clock
):
    api = allowlisted(app_factory, config_factory)
    bay = worker(api)
    board(api, "PORT-7", "PORT-8")
    running, waiting = make_job("PORT-7"), make_job("PORT-8")
    assert claim(bay).json["job"]["id"] == running
    step = assembly.lease_reaper(config, clock).step

    clock.advance(seconds=299)  # the app's lease: 300 s
    assert step() is False
    assert api.get(f"/api/v1/dispatch/jobs/{running}").json["state"] == "running"
    clock.advance(seconds=2)
    assert step() is False  # one job handled: not a full batch
    put_back = api.get(f"/api/v1/dispatch/jobs/{running}").json
    assert (put_back["state"], put_back["attempts"], put_back["bay"]) == ("queued", 1, None)
    assert api.get(f"/api/v1/dispatch/jobs/{waiting}").json["attempts"] == 0
