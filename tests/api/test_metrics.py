"""GET /metrics: the Prometheus text format 0.0.4 as prometheus_client writes it, read back with its parser."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from api.prometheus import AppendOnlyCount, RequestMetrics

from conftest import PASSWORDS

NOTIFY = "/api/v1/agents/writing/notify"


def scrape(api) -> dict[str, list]:
    """family name -> its samples, as Prometheus reads them (counters lose their `_total` in the family name)."""
    result = api.get("/metrics")
    assert result.status_code == 200
    assert result.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {family.name: family.samples for family in text_string_to_metric_families(result.text)}


def value(samples, name: str, **labels) -> float:
    found = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, [s for s in samples if s.name == name])
    return found[0]


def test_metrics_need_basic_credentials(api):
    refused = api.get("/metrics", auth=None)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith('Basic realm="svc"')
    assert api.get("/metrics", auth="ci").status_code == 401  # the CI secret is for the CI's own endpoints
    assert api.get("/metrics").status_code == 200


@pytest.mark.filterwarnings("ignore:Unknown REQUEST_METHOD")
def test_requests_are_counted_by_method_route_template_and_status_class(api):
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port"})
    api.post("/api/v1/tickets", json={"key": "PORT-1", "initiative_id": "port", "title": "x"})
    api.get("/api/v1/tickets/PORT-1")
    api.get("/api/v1/tickets/PORT-1")
    api.get("/api/v1/tickets/NOPE-9")
    api.get("/api/v1/tickets", auth=None)
    api.client.simulate_request("BREW", "/nowhere/at/all")  # invented method and path: bounded labels

    families = scrape(api)
    requests = families["svc_http_requests"]
    assert value(requests, "svc_http_requests_total", method="GET", route="/api/v1/tickets/{key}", status="2xx") == 2
    assert value(requests, "svc_http_requests_total", method="GET", route="/api/v1/tickets/{key}", status="4xx") == 1
    assert value(requests, "svc_http_requests_total", method="GET", route="/api/v1/tickets", status="4xx") == 1
    assert value(requests, "svc_http_requests_total", method="OTHER", route="unmatched", status="4xx") == 1
    assert not any("PORT-1" in str(s.labels) or "nowhere" in str(s.labels) for s in requests)

    latency = families["svc_http_request_duration_seconds"]
    labels = {"method": "GET", "route": "/api/v1/tickets/{key}", "status": "2xx"}
    buckets = [s for s in latency if s.name.endswith("_bucket") and all(s.labels[k] == v for k, v in labels.items())]
    bounds = [float(s.labels["le"]) for s in buckets]
    assert bounds == sorted(bounds) and bounds[-1] == float("inf")
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and counts[-1] == 2  # cumulative, +Inf holds them all
    assert value(latency, "svc_http_request_duration_seconds_count", **labels) == 2
    assert value(latency, "svc_http_request_duration_seconds_sum", **labels) > 0


@pytest.mark.both_backends
def test_outbox_backlog_by_kind_with_the_age_of_the_oldest(api, clock):
    families = scrape(api)
    assert value(families["svc_outbox_pending_messages"], "svc_outbox_pending_messages", kind="chat") == 0
    assert api.post(NOTIFY, auth="ci", json={"status": "BACKFILL_READY"}).status_code == 200
    clock.advance(seconds=90)
    api.post(NOTIFY, auth="ci", json={"status": "FAIL_QA"})

    families = scrape(api)
    pending = families["svc_outbox_pending_messages"]
    oldest = families["svc_outbox_oldest_pending_age_seconds"]
    assert value(pending, "svc_outbox_pending_messages", kind="chat") == 2
    assert value(oldest, "svc_outbox_oldest_pending_age_seconds", kind="chat") == 90
    assert value(pending, "svc_outbox_pending_messages", kind="tracker_close") == 0
    assert value(oldest, "svc_outbox_oldest_pending_age_seconds", kind="tracker_close") == 0


@pytest.mark.both_backends
def test_decisions_by_outcome_and_agent_runs_by_agent_and_result(api):
    from events_kit import example

    api.post(NOTIFY, auth="ci", json={"status": "SUCCESS"})
    api.post(NOTIFY, auth="ci", json={"status": "FAIL_PUSH"})
    api.post(NOTIFY, auth="ci", json={"status": "FAIL_QA"})
    blocked = example(
        "envelopes/mapping/1-tracker-state-changed-queued-to-execute.json"
    )  # the allowlist is empty: blocked
    assert api.post("/api/v1/events", auth="ci", json=blocked).status_code == 202
    broken = {**blocked, "id": "broken-1", "source": "nowhere"}
    assert api.post("/api/v1/events", auth="ci", json=broken).status_code == 422

    families = scrape(api)
    decisions = families["svc_router_decisions"]
    assert value(decisions, "svc_router_decisions_total", outcome="blocked") == 1
    assert value(decisions, "svc_router_decisions_total", outcome="rejected") == 1
    assert value(decisions, "svc_router_decisions_total", outcome="would_dispatch") == 0
    runs = families["svc_agent_runs"]
    assert value(runs, "svc_agent_runs_total", agent_id="writing-daily", status="ok") == 1
    assert value(runs, "svc_agent_runs_total", agent_id="writing-daily", status="failed") == 2
    assert value(runs, "svc_agent_runs_total", agent_id="ops-daily-pulse", status="ok") == 0


def test_each_scrape_carries_this_processs_cpu_memory_and_gc_and_no_created_series(api):
    text = api.get("/metrics").text
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert value(families["process_resident_memory_bytes"].samples, "process_resident_memory_bytes") > 0
    assert value(families["process_cpu_seconds"].samples, "process_cpu_seconds_total") > 0
    assert "python_gc_objects_collected" in families
    assert "_created" not in text  # one series per child, not two


def test_two_apps_in_one_process_count_their_own_requests(app_factory):
    from conftest import BASIC, CI_SECRET
    from testclient import ApiClient

    first, second = (ApiClient(app_factory(), basic=BASIC, ci_secret=CI_SECRET) for _ in range(2))
    first.get("/api/v1/tickets")
    first.get("/api/v1/tickets")
    second.get("/api/v1/tickets")
    labels = {"method": "GET", "route": "/api/v1/tickets", "status": "2xx"}
    assert value(scrape(first)["svc_http_requests"], "svc_http_requests_total", **labels) == 2
    assert value(scrape(second)["svc_http_requests"], "svc_http_requests_total", **labels) == 1


def test_a_slow_request_lands_only_in_the_buckets_above_it():
    registry = CollectorRegistry()
    metrics = RequestMetrics(registry, buckets=(0.1, 1.0))
    metrics("GET", "/x", 200, 0.5)
    metrics("GET", "/x", 200, 0.05)
    metrics("BREW", "/x", 418, 0.05)
    text = generate_latest(registry).decode()
    (parsed,) = [f for f in text_string_to_metric_families(text) if f.type == "histogram"]
    ok = {s.labels["le"]: s.value for s in parsed.samples if s.name.endswith("_bucket") and s.labels["status"] == "2xx"}
    assert ok == {"0.1": 1.0, "1.0": 2.0, "+Inf": 2.0}
    assert {s.labels["method"] for s in parsed.samples} == {"GET", "OTHER"}  # an invented method is OTHER


class FakeTable:
    """An append-only table whose rows become visible when "committed", possibly out of id order."""

    def __init__(self):
        self.visible: dict[int, str] = {}
        self.ranges: list[tuple[int, int | None]] = []

    def counts(self, after: int, up_to: int | None) -> dict[tuple[str, ...], int]:
        self.ranges.append((after, up_to))
        out: dict[tuple[str, ...], int] = {}
        for row_id, label in self.visible.items():
            if row_id > after and (up_to is None or row_id <= up_to):
                out[(label,)] = out.get((label,), 0) + 1
        return out

    def max_id(self) -> int:
        return max(self.visible, default=0)


@pytest.mark.parametrize("late_commit", [False, True])
def test_append_only_counts_count_only_the_unsettled_tail_and_miss_no_late_commit(late_commit):
    table, ticks = FakeTable(), [0.0]
    counter = AppendOnlyCount(table.counts, table.max_id, settle_seconds=300, monotonic=lambda: ticks[0])
    table.visible.update({1: "a", 2: "b", 4: "a"})  # id 3 is handed out but not committed yet
    assert counter.read() == {("a",): 2, ("b",): 1}
    assert table.ranges[-1] == (0, None)  # before anything settles, the whole table is counted
    if late_commit:
        ticks[0] = 200.0
        table.visible[3] = "b"  # committed within the settle time
    ticks[0] = 400.0
    assert counter.read() == ({("a",): 2, ("b",): 2} if late_commit else {("a",): 2, ("b",): 1})
    assert counter.settled_id == 4
    table.visible[5] = "a"
    table.ranges.clear()
    assert counter.read() == ({("a",): 3, ("b",): 2} if late_commit else {("a",): 3, ("b",): 1})
    assert table.ranges == [(4, None)]  # only the tail after the settled id


@pytest.mark.both_backends
def test_the_jobs_heartbeat_age_appears_once_a_jobs_process_beat(api, clock):
    from jobs.process import JobsProcess

    assert "svc_jobs_heartbeat_age_seconds" not in scrape(api)  # no jobs process ever beat
    JobsProcess(clock, {}).heartbeat()
    clock.advance(seconds=30)
    families = scrape(api)
    assert value(families["svc_jobs_heartbeat_age_seconds"], "svc_jobs_heartbeat_age_seconds") == 30


@pytest.mark.both_backends
def test_dispatch_jobs_queued_and_running_and_the_forge_writes_backlog(api):
    from dispatch_kit import claim, make_job

    from domain import accounts

    from events_kit import seed_board
    from testclient import ApiClient

    families = scrape(api)
    assert value(families["svc_dispatch_jobs"], "svc_dispatch_jobs", state="queued") == 0
    assert value(families["svc_outbox_pending_messages"], "svc_outbox_pending_messages", kind="forge_write") == 0
    seed_board(api, tickets={"PORT-7": "queued", "PORT-8": "queued"})
    make_job("PORT-7")
    make_job("PORT-8")
    accounts.add("bay-1", "worker", "worker-password-1", passwords=PASSWORDS)
    assert claim(ApiClient(api.client.app, basic="bay-1:worker-password-1", ci_secret="")).status_code == 200
    jobs = scrape(api)["svc_dispatch_jobs"]
    assert (value(jobs, "svc_dispatch_jobs", state="queued"), value(jobs, "svc_dispatch_jobs", state="running")) == (
        1,
        1,
    )
