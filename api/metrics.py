"""Metrics in the Prometheus text exposition format, version 0.0.4, written here (it is a small format).

Two kinds of figures:
- per process: requests by method, route template and status class, with a latency histogram. Each
  `svc serve` process counts its own requests; with several behind a load balancer, scrape each and sum.
- from the database, the same whichever process answers: the outbox backlog, decisions by outcome, agent
  runs by agent and result, the jobs heartbeat. Take the max (not the sum) across API processes.

Decisions and runs are append-only, so their counters are kept cheaply (`AppendOnlyCount`): rows up to a
settled id are counted once and remembered; each scrape counts only the rows after that id.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from jobs.router.shadow import OUTCOMES
from jobs.schedules import AGENT_IDS
from storage import metrics as queries
from storage.db import connection
from svc.clock import Clock

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Prometheus's default buckets, in seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
# Every kind the service queues; each is reported (0 when none is pending) so an alert never sees it vanish.
OUTBOX_KINDS = ("chat", "route_event", "slot_release", "tracker_close")
# How long a transaction that inserts a decision or a run may stay open: ids seen this long ago are settled.
SETTLE_SECONDS = 300.0


# -- the exposition format ------------------------------------------------------------------------------------


@dataclass
class Family:
    """One metric family: its name, type and help, and its samples `(suffix, labels, value)`."""

    name: str
    kind: str  # counter, gauge, histogram
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, suffix: str = "", **labels: str) -> Family:
        self.samples.append((suffix, labels, value))
        return self


def render(families: Iterable[Family]) -> str:
    lines = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for suffix, labels, value in family.samples:
            shown = ",".join(f'{k}="{_escape_label(str(v))}"' for k, v in labels.items())
            lines.append(
                f"{family.name}{suffix}{{{shown}}} {_number(value)}"
                if shown
                else f"{family.name}{suffix} {_number(value)}"
            )
    return "\n".join(lines) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


# -- requests, per process ------------------------------------------------------------------------------------


class RequestMetrics:
    """A request observer (`RequestContext(observers=[...])`): counts and latency by method, route, status class."""

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS):
        self.buckets = buckets
        self._lock = threading.Lock()
        # (method, route, status class) -> [count per bucket..., count, sum]
        self._series: dict[tuple[str, str, str], list[float]] = {}

    def __call__(self, method: str, route: str, status: int, elapsed: float) -> None:
        # Labels come from a bounded set: a client's invented method or path cannot grow the series.
        key = (method if method in _METHODS else "OTHER", route, f"{status // 100}xx")
        with self._lock:
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = [0] * (len(self.buckets) + 1) + [0.0]
            for i, bound in enumerate(self.buckets):
                if elapsed <= bound:
                    series[i] += 1
            series[-2] += 1
            series[-1] += elapsed

    def families(self) -> list[Family]:
        with self._lock:
            snapshot = {key: list(values) for key, values in sorted(self._series.items())}
        total = Family("svc_http_requests_total", "counter", "HTTP requests answered by this process.")
        latency = Family(
            "svc_http_request_duration_seconds", "histogram", "Time to answer a request in this process, in seconds."
        )
        for (method, route, status), values in snapshot.items():
            labels = {"method": method, "route": route, "status": status}
            total.add(int(values[-2]), **labels)
            for bound, count in zip(self.buckets, values, strict=False):
                latency.add(int(count), "_bucket", **labels, le=_number(bound))
            latency.add(int(values[-2]), "_bucket", **labels, le="+Inf")
            latency.add(values[-1], "_sum", **labels)
            latency.add(int(values[-2]), "_count", **labels)
        return [total, latency]


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


# -- what /metrics shows --------------------------------------------------------------------------------------


class Metrics:
    """Everything `GET /metrics` shows: this process's requests and the database's figures."""

    def __init__(self, clock: Clock, *, heartbeat_age: Callable | None = None):
        self.clock = clock
        self.requests = RequestMetrics()
        self.decisions = AppendOnlyCount(queries.decision_counts, queries.max_decision_id)
        self.runs = AppendOnlyCount(queries.run_counts, queries.max_run_id)
        self.heartbeat_age = heartbeat_age

    def exposition(self) -> str:
        return render(self.requests.families() + self.database_families())

    def database_families(self) -> list[Family]:
        with connection():
            now = self.clock()
            pending = queries.outbox_pending_by_kind()
            decisions = self.decisions.read()
            runs = self.runs.read()
            heartbeat = self.heartbeat_age(now) if self.heartbeat_age is not None else None
        backlog = Family("svc_outbox_pending_messages", "gauge", "Side effects queued and not yet delivered, by kind.")
        oldest = Family(
            "svc_outbox_oldest_pending_age_seconds",
            "gauge",
            "Age of the oldest undelivered side effect, by kind (0 when none is pending).",
        )
        for kind in sorted(set(OUTBOX_KINDS) | set(pending)):
            count, queued_at = pending.get(kind, (0, None))
            backlog.add(count, kind=kind)
            oldest.add(max((now - queued_at).total_seconds(), 0.0) if queued_at else 0.0, kind=kind)
        outcomes = Family("svc_router_decisions_total", "counter", "Decisions the shadow router recorded, by outcome.")
        for outcome in sorted(set(OUTCOMES) | {key[0] for key in decisions}):
            outcomes.add(decisions.get((outcome,), 0), outcome=outcome)
        agent_runs = Family(
            "svc_agent_runs_total", "counter", "Agent runs recorded, by agent and result (ok or failed)."
        )
        every_agent = {(agent_id, status) for agent_id in AGENT_IDS for status in ("ok", "failed")}
        for agent_id, status in sorted(every_agent | set(runs)):
            agent_runs.add(runs.get((agent_id, status), 0), agent_id=agent_id, status=status)
        families = [backlog, oldest, outcomes, agent_runs]
        if heartbeat is not None:
            families.append(
                Family("svc_jobs_heartbeat_age_seconds", "gauge", "Seconds since a jobs process last beat.").add(
                    max(heartbeat, 0.0)
                )
            )
        return families
