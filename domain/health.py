"""What `GET /healthz` (`api/resources/health.py`) reports: each check ok or failing, with a detail,
and whether this process can serve.

The checks: `database` (it answers, and writes have not been failing in the last seconds), `disk` (the space left
where SQLite keeps its file), `jobs` (the jobs process's heartbeat), `outbox` (messages waiting too long or given
up) and `forge_secret` (GitHub and GitLab verified with one value). Only the checks in `SERVING` make the answer
503, because only they stop this process from answering requests; a load balancer that took a process out on any
other failing check (the jobs process down, say) would pull a healthy API. The others show as `degraded`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from domain.config import Config
from domain.ops.pulse import service_health
from domain.outage import DatabaseOutage
from storage.db import DISK, sqlite_path

OK, DEGRADED, FAILING = "ok", "degraded", "failing"
# The checks whose failure stops this process from serving.
SERVING = frozenset({"database", "disk"})
# An outage counts against health for this long after its last failed operation, and no longer: the process's
# own requests are what would end it, and a load balancer sends none to a process whose health fails.
RECENT_SECONDS = 10.0
MIB = 1024 * 1024


@dataclass(frozen=True)
class Health:
    checks: dict[str, dict[str, Any]]

    @property
    def status(self) -> str:
        failing = {name for name, check in self.checks.items() if not check["ok"]}
        if failing & SERVING:
            return FAILING
        return DEGRADED if failing else OK

    @property
    def degraded(self) -> list[tuple[str, str]]:
        """(name, detail) of every failing check, for the board."""
        return [(name, check["detail"]) for name, check in self.checks.items() if not check["ok"]]

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "checks": self.checks}


def health(config: Config, now: datetime, outage: DatabaseOutage) -> Health:
    """Run every check now."""
    checks = service_health(now)
    if not checks["database"]["ok"]:
        # What only the database knows cannot be read while it is down: said, not left out of the body.
        unknown = "not known while the database cannot be read"
        checks.setdefault("jobs", {"ok": False, "detail": f"jobs heartbeat {unknown}"})
        checks.setdefault("outbox", {"ok": False, "detail": f"outbox backlog {unknown}"})
    current = outage.current
    recent = current is not None and outage.monotonic() - current.last < RECENT_SECONDS
    database = checks["database"]
    if recent and current.kind != DISK and database["ok"]:
        database.update(ok=False, detail=f"{database['detail']}, but writes fail: {current.cause}")
    checks["disk"] = disk_check(
        config, sqlite_path(), recent_disk_failure=current.cause if recent and current.kind == DISK else None
    )
    forge_ok, forge_detail = config.forge_secret_check()
    checks["forge_secret"] = {"ok": forge_ok, "detail": forge_detail}
    return Health(checks)


def disk_check(config: Config, database_file: Path | None, *, recent_disk_failure: str | None = None) -> dict[str, Any]:
    """The space left on the file system of SQLite's file, against `SVC_MIN_FREE_DISK_MB`."""
    if database_file is None:
        detail = "PostgreSQL keeps its files on its own server: its space is watched there"
        if recent_disk_failure:
            return {"ok": False, "detail": f"the database's disk refuses writes: {recent_disk_failure}"}
        return {"ok": True, "detail": detail}
    where = database_file.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError as exc:
        return {"ok": False, "detail": f"cannot read the space left in {where}: {exc.strerror}"}
    minimum = config.min_free_disk_mb * MIB
    free_text = f"{free / MIB:.0f} MiB free in {where}"
    if free < minimum:
        return {
            "ok": False,
            "detail": f"disk nearly full: {free_text}, below the minimum of {config.min_free_disk_mb} MiB "
            "(SVC_MIN_FREE_DISK_MB); SQLite cannot take writes on a full disk",
            "free_bytes": free,
        }
    if recent_disk_failure:
        return {"ok": False, "detail": f"writes fail: {recent_disk_failure} ({free_text})", "free_bytes": free}
    return {"ok": True, "detail": f"{free_text} (minimum {config.min_free_disk_mb} MiB)", "free_bytes": free}
