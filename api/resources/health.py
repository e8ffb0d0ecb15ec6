"""GET /healthz (the checks in `domain/health.py`): each check ok or failing; 503 only when this process cannot
serve."""

from __future__ import annotations

import falcon

from api.operations import PUBLIC, Operation
from domain import health
from domain.config import Config
from domain.outage import DatabaseOutage


class Health:
    operations = {
        "GET": Operation(
            "Health: each check (database, disk, jobs heartbeat, outbox, forge secret) ok or failing with a detail; "
            "503 (status failing) only when this process cannot serve (the database, the disk); another failing "
            "check is status degraded, still 200",
            auth=PUBLIC,
            responses={200: "health.json", 503: "health.json"},
            tags=("service",),
        ),
    }

    def __init__(self, config: Config, clock, outage: DatabaseOutage):
        self.config = config
        self.clock = clock
        self.outage = outage

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = health.health(self.config, self.clock(), self.outage)
        resp.status = falcon.HTTP_503 if found.status == health.FAILING else falcon.HTTP_200
        resp.media = found.as_dict()


def routes(services) -> list[tuple[str, object]]:
    return [("/healthz", Health(services.config, services.clock, services.outage))]
