"""`GET /metrics` on prometheus_client: one `CollectorRegistry` per app, nothing process-global.

Three kinds of figures:
- this process's requests: a counter and a latency histogram by method, route template and status class
  (`RequestMetrics`, an observer of api/middleware.py). Each `svc serve` process counts its own requests;
  waitress serves them on threads of one process, so there is no multiprocess mode to set up: scrape every
  process and sum.
- this process itself: prometheus_client's process collector (CPU, memory, file descriptors) and GC collector.
- the database, the same whichever process answers: the outbox backlog, decisions by outcome, agent runs by
  agent and result, the jobs heartbeat (`DatabaseCollector`, read at scrape time). Take the max, not the sum.

Decisions and runs are append-only, so their counters are kept cheaply (`AppendOnlyCount`): rows up to a
settled id are counted once and remembered; each scrape counts only the rows after that id.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, GCCollector, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from domain.board import SLOT_RELEASE_KIND, TRACKER_CLOSE_KIND
from domain.chat import KIND as CHAT_KIND
from domain.clock import Clock
from domain.dispatch.jobs import FORGE_WRITE_KIND
from domain.ops.schedules import AGENT_IDS
from domain.router.board_events import ROUTE_KIND
from domain.router.routing import OUTCOMES
from machines.job import QUEUED, RUNNING
from storage import metrics as queries
from storage.db import connection

# The classic text format (0.0.4) that `generate_latest` writes, which every Prometheus reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Prometheus's default buckets, in seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
# Every kind the service queues; each is reported (0 when none is pending) so an alert never sees it vanish.
OUTBOX_KINDS = (CHAT_KIND, ROUTE_KIND, SLOT_RELEASE_KIND, TRACKER_CLOSE_KIND, FORGE_WRITE_KIND)
# The dispatch jobs' states that are counted: those a job is in for a while (the others only grow).
JOB_STATES = (QUEUED, RUNNING)
# How long a transaction that inserts a decision or a run may stay open: ids seen this long ago are settled.
SETTLE_SECONDS = 300.0

# A `_created` series per counter and histogram child doubles what a scrape carries and tells Prometheus
# nothing it uses (the counters start at zero with the process). prometheus_client keeps this switch per
# process, not per registry.
prometheus_client.disable_created_metrics()


# -- requests, per process ------------------------------------------------------------------------------------


class RequestMetrics:
    """A request observer (`RequestContext(observers=[...])`): counts and latency by method, route, status class."""

    def __init__(self, registry: CollectorRegistry, buckets: tuple[float, ...] = LATENCY_BUCKETS):
        labels = ("method", "route", "status")
        self.total = Counter("svc_http_requests", "HTTP requests answered by this process.", labels, registry=registry)
        self.latency = Histogram(
            "svc_http_request_duration_seconds",
            "Time to answer a request in this process, in seconds.",
            labels,
            registry=registry,
            buckets=buckets,
        )
        # The children of each label set, found once: `labels()` checks and locks on every call.
        self._children: dict[tuple[str, str, int], tuple] = {}
        self._lock = threading.Lock()

    def __call__(self, method: str, route: str, status: int, elapsed: float) -> None:
        key = (method, route, status // 100)
        children = self._children.get(key)
        if children is None:
            # Labels come from a bounded set: a client's invented method or path cannot grow the series.
            shown = (method if method in _METHODS else "OTHER", route, f"{status // 100}xx")
            with self._lock:
                children = self._children[key] = (self.total.labels(*shown), self.latency.labels(*shown))
        children[0].inc()
        children[1].observe(elapsed)


# -- counts of append-only tables -----------------------------------------------------------------------------


class AppendOnlyCount:
    """Counts of an append-only table by label, without counting the whole table on every scrape.

    An id is settled once every row up to it is committed or rolled back for good: ids are handed out in
    order, so every id at or below the highest one visible at time T was handed out before T, and no
    transaction stays open for `settle_seconds`. Counts up to the settled id are kept; a scrape counts only
    the rows after it (an id range). The first scrapes after a start count the whole table until an id settles.
    """

    def __init__(
        self,
        counts: Callable[[int, int | None], dict[tuple[str, ...], int]],
        max_id: Callable[[], int],
        *,
        settle_seconds: float = SETTLE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self._counts = counts
        self._max_id = max_id
        self.settle_seconds = settle_seconds
        self.monotonic = monotonic
        self.settled_id = 0
        self._settled: dict[tuple[str, ...], int] = {}
        self._seen: list[tuple[float, int]] = []  # (when, highest visible id), oldest first
        self._lock = threading.Lock()

    def read(self) -> dict[tuple[str, ...], int]:
        """label values -> rows; call with a database connection open."""
        with self._lock:
            now = self.monotonic()
            ripe = [seen_id for when, seen_id in self._seen if now - when >= self.settle_seconds]
            if ripe and max(ripe) > self.settled_id:
                newly = max(ripe)
                for key, count in self._counts(self.settled_id, newly).items():
                    self._settled[key] = self._settled.get(key, 0) + count
                self.settled_id = newly
            self._seen = [(when, seen_id) for when, seen_id in self._seen if now - when < self.settle_seconds]
            if not self._seen or now - self._seen[-1][0] >= 10.0:  # one observation per 10 s is plenty
                self._seen.append((now, self._max_id()))
            totals = dict(self._settled)
            for key, count in self._counts(self.settled_id, None).items():
                totals[key] = totals.get(key, 0) + count
            return totals


# -- the database's figures ----------------------------------------------------------------------------------


class DatabaseCollector:
    """A custom collector: the database's figures, read when Prometheus scrapes (one connection, index ranges)."""

    def __init__(self, clock: Clock, *, heartbeat_age: Callable | None = None):
        self.clock = clock
        self.decisions = AppendOnlyCount(queries.decision_counts, queries.max_decision_id)
        self.runs = AppendOnlyCount(queries.run_counts, queries.max_run_id)
        self.heartbeat_age = heartbeat_age

    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration; and describing must not touch the database

    def collect(self) -> Iterator[Metric]:
        with connection():
            now = self.clock()
            pending = queries.outbox_pending_by_kind()
            decisions = self.decisions.read()
            runs = self.runs.read()
            jobs = queries.jobs_in_states(JOB_STATES)
            heartbeat = self.heartbeat_age(now) if self.heartbeat_age is not None else None
        backlog = GaugeMetricFamily(
            "svc_outbox_pending_messages", "Side effects queued and not yet delivered, by kind.", labels=["kind"]
        )
        oldest = GaugeMetricFamily(
            "svc_outbox_oldest_pending_age_seconds",
            "Age of the oldest undelivered side effect, by kind (0 when none is pending).",
            labels=["kind"],
        )
        for kind in sorted(set(OUTBOX_KINDS) | set(pending)):
            count, queued_at = pending.get(kind, (0, None))
            backlog.add_metric([kind], count)
            oldest.add_metric([kind], max((now - queued_at).total_seconds(), 0.0) if queued_at else 0.0)
        yield backlog
        yield oldest
        outcomes = CounterMetricFamily(
            "svc_router_decisions", "Decisions the shadow router recorded, by outcome.", labels=["outcome"]
        )
        for outcome in sorted(set(OUTCOMES) | {key[0] for key in decisions}):
            outcomes.add_metric([outcome], decisions.get((outcome,), 0))
        yield outcomes
        agent_runs = CounterMetricFamily(
            "svc_agent_runs", "Agent runs recorded, by agent and result (ok or failed).", labels=["agent_id", "status"]
        )
        every_agent = {(agent_id, status) for agent_id in AGENT_IDS for status in ("ok", "failed")}
        for agent_id, status in sorted(every_agent | set(runs)):
            agent_runs.add_metric([agent_id, status], runs.get((agent_id, status), 0))
        yield agent_runs
        waiting = GaugeMetricFamily(
            "svc_dispatch_jobs", "Dispatch jobs queued for a worker, and running in a bay.", labels=["state"]
        )
        for state in JOB_STATES:
            waiting.add_metric([state], jobs.get(state, 0))
        yield waiting
        if heartbeat is not None:
            yield GaugeMetricFamily(
                "svc_jobs_heartbeat_age_seconds", "Seconds since a jobs process last beat.", value=max(heartbeat, 0.0)
            )


# -- what /metrics shows --------------------------------------------------------------------------------------


class Metrics:
    """Everything `GET /metrics` shows, in this app's own registry."""

    def __init__(self, clock: Clock, *, heartbeat_age: Callable | None = None):
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = RequestMetrics(self.registry)
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.database = DatabaseCollector(clock, heartbeat_age=heartbeat_age)
        self.registry.register(self.database)

    def exposition(self) -> bytes:
        """The text format of every figure, as of now."""
        return prometheus_client.generate_latest(self.registry)
