"""What `GET /healthz` (`api/resources/health.py`) reports: each check ok or failing, with a detail,
and whether this process can serve.

Only the checks in `SERVING` make the answer 503, because only they stop this process from answering requests; a
load balancer that takes a process out on any other failing check (the shared forge secret, say) would pull a
healthy API. The others show as `degraded`."""

from __future__ import annotations

from dataclasses import dataclass

from domain.config import Config
from storage.db import ping

OK, DEGRADED, FAILING = "ok", "degraded", "failing"
# The checks whose failure stops this process from serving.
SERVING = frozenset({"database"})


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str


@dataclass(frozen=True)
class Health:
    checks: dict[str, Check]

    @property
    def status(self) -> str:
        failing = {name for name, check in self.checks.items() if not check.ok}
        if failing & SERVING:
            return FAILING
        return DEGRADED if failing else OK

    def as_dict(self) -> dict:
        return {
            "status": self.status,
            "checks": {name: {"ok": c.ok, "detail": c.detail} for name, c in self.checks.items()},
        }


def health(config: Config) -> Health:
    """Run every check now."""
    database_ok, database_detail = ping()
    forge_ok, forge_detail = config.forge_secret_check()
    return Health(
        {
            "database": Check(database_ok, database_detail),
            "forge_secret": Check(forge_ok, forge_detail),
        }
    )
