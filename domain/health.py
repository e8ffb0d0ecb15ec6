"""The service's health checks, one source for what `GET /healthz` (`api/resources/health.py`) reports, the daily
pulse's health issues and the ops snapshot's `health` (`domain/ops/`): each check ok or failing, with a detail, and
whether this process can serve.

The checks: `database` (it answers, and writes have not been failing in the last seconds), `disk` (the space left
where SQLite keeps its file), `jobs` (the jobs process's heartbeat), `outbox` (messages waiting too long or given
up) and `forge_secret` (GitHub and GitLab verified with one value). Only the checks in `SERVING` make the answer
503, because only they stop this process from answering requests; a load balancer that took a process out on any
other failing check (the jobs process down, say) would pull a healthy API. The others show as `degraded`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from domain.config import Config
from domain.outage import DatabaseOutage
from storage import job_state, outbox
from storage.db import DISK, ping, sqlite_path

OK, DEGRADED, FAILING = "ok", "degraded", "failing"
# How often a jobs process beats (`jobs/process.py`). A beat two minutes old (two dozen missed) means the jobs
# are down: the heartbeat has its own thread, so a long bay wipe never delays it.
HEARTBEAT_SECONDS = 5
HEARTBEAT_STALE = timedelta(seconds=HEARTBEAT_SECONDS * 24)
OUTBOX_STALE = timedelta(minutes=15)
FAILED_WINDOW = timedelta(hours=24)
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
    """Run every check now. `outage` is what this process knows of a database outage (its recent failed writes)."""
    db_ok, db_detail = ping()
    checks: dict[str, dict[str, Any]] = {"database": {"ok": db_ok, "detail": db_detail}}
    if db_ok:
        checks["jobs"] = jobs_check(now)
        checks["outbox"] = outbox_check(now)
    else:
        # What only the database knows cannot be read while it is down: said, not left out of the body.
        unknown = "not known while the database cannot be read"
        checks["jobs"] = {"ok": False, "detail": f"jobs heartbeat {unknown}"}
        checks["outbox"] = {"ok": False, "detail": f"outbox backlog {unknown}"}
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


def jobs_check(now: datetime) -> dict[str, Any]:
    """Whether a jobs process beat lately (`HEARTBEAT_STALE`)."""
    age = heartbeat_age(now)
    if age is None:
        return {
            "ok": False,
            "detail": "no jobs process has ever reported: chat posts and tracker closes are not delivered",
            "heartbeat_age_seconds": None,
        }
    age = max(age, 0.0)
    fresh = age <= HEARTBEAT_STALE.total_seconds()
    detail = (
        f"jobs process alive (last heartbeat {age:.0f} s ago)"
        if fresh
        else f"no jobs process heartbeat for {duration(age)}: chat posts and tracker closes are not delivered"
    )
    return {"ok": fresh, "detail": detail, "heartbeat_age_seconds": round(age, 1)}


def outbox_check(now: datetime) -> dict[str, Any]:
    """Messages pending longer than `OUTBOX_STALE`, or given up in the last `FAILED_WINDOW`."""
    backlog = outbox.backlog(now=now)
    failed = outbox.count_failed_since(now - FAILED_WINDOW)
    problems = []
    if backlog["pending"] and backlog["oldest_age_seconds"] > OUTBOX_STALE.total_seconds():
        problems.append(
            f"{backlog['pending']} outbox message(s) pending, the oldest for {duration(backlog['oldest_age_seconds'])}"
        )
    if failed:
        problems.append(f"{failed} outbox message(s) given up in the last 24 h")
    return {
        "ok": not problems,
        "detail": "; ".join(problems) or f"{backlog['pending']} pending, nothing overdue",
        "pending": backlog["pending"],
        "oldest_age_seconds": round(backlog["oldest_age_seconds"], 1),
        "failed_last_24h": failed,
    }


def heartbeat_age(now: datetime) -> float | None:
    """Seconds since any jobs process last beat, or None if none ever did."""
    last = job_state.last_beat()
    return None if last is None else (now - last).total_seconds()


def duration(seconds: float) -> str:
    """A duration as a person reads it at a glance: 45 s, 20 min, 5 h, 3 d."""
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


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
