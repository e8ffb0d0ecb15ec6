"""GET /metrics (its queries: `storage/metrics.py`): the Prometheus text exposition written by prometheus_client
(see api/prometheus.py), behind basic credentials."""

from __future__ import annotations

import falcon

from api.operations import Operation
from api.prometheus import CONTENT_TYPE, Metrics


class MetricsPage:
    operations = {
        "GET": Operation(
            "Metrics in the Prometheus text format 0.0.4: this process's requests, CPU, memory and garbage "
            "collection; the outbox, decisions and agent runs from the database",
            responses={200: None},
            tags=("service",),
            content_type="text/plain",
        ),
    }

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = CONTENT_TYPE
        resp.data = self.metrics.exposition()


def routes(services) -> list[tuple[str, object]]:
    return [("/metrics", MetricsPage(services.metrics))]
