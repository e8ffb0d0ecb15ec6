"""The daily pulse (08:00 UTC): service health (the checks `GET /healthz` reports, `domain/health.py`), stuck and
Needs-you tickets, staging over HTTPS, the wallet; a chat post when it finds issues (always with OPS_PULSE_ALWAYS=1
or `post_to_chat: always`, never with `never`); then the slot steward.

The checks that read the board are plain functions, shared with the ops snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from domain import automation, chat
from domain.clock import Clock, iso, parse_timestamp
from domain.config import Config
from domain.health import duration, health
from domain.ops import runs
from domain.ops.runs import Trigger
from domain.ops.steward import BayReport, SlotSteward
from domain.outage import DatabaseOutage
from integrations import staging
from integrations.staging import StagingResult
from machines.stages import LIVE_STAGES
from storage import settings, tickets, wallet
from storage.db import connection, transaction
from storage.models import AgentRun, Ticket

PULSE_AGENT = "ops-daily-pulse"
POST_MODES = ("auto", "always", "never")
WALLET_WARN_PERCENT = 80.0
LISTED = 10
STAGING_SETTING = "ops.staging.last_check"

StagingCheck = Callable[[datetime], StagingResult]


@dataclass(frozen=True)
class Issue:
    check: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"check": self.check, "detail": self.detail}


@dataclass(frozen=True)
class PulseReport:
    issues: list[Issue]
    posted: bool
    message: str
    steward: BayReport
    staging: StagingResult
    run: AgentRun


# -- checks, shared with the snapshot ---------------------------------------------------------------------


hidden_from_needs_you = automation.hidden_from_needs_you


def stuck_before(config: Config, now: datetime) -> datetime:
    return now - timedelta(hours=config.stuck_after_hours)


def count_stuck(config: Config, now: datetime) -> int:
    """Stuck tickets as the pulse counts them: the writing ticket left out while writing automation is off,
    as the Needs-you list leaves it out (nobody is meant to move it then)."""
    return tickets.count_stuck(
        changed_before=stuck_before(config, now), live_stages=LIVE_STAGES, exclude_keys=hidden_from_needs_you()
    )


def wallet_state() -> dict[str, Any]:
    row = wallet.get()
    return {
        "budget": float(row.budget),
        "spent": float(row.spent),
        "percent_used": wallet.percent_used(row),
        "locked": bool(row.locked),
    }


def remember_staging(result: StagingResult, *, at: datetime, by: str) -> None:
    """Keep the last staging check, so the snapshot shows it without an outbound call per GET."""
    settings.put(STAGING_SETTING, staging_record(result), at=at, by=by)


def last_staging() -> StagingResult | None:
    row = settings.get(STAGING_SETTING)
    return staging_from_record(row.value) if row is not None else None


def staging_record(result: StagingResult) -> dict[str, Any]:
    """A staging check as it is kept and shown (the setting, a run's details, the snapshot's `last_check`)."""
    return {
        "checked_at": iso(result.checked_at),
        "url": result.url,
        "ok": result.ok,
        "skipped": result.skipped,
        "detail": result.detail,
        "status": result.status,
        "certificate_expires_at": iso(result.certificate_expires_at),
        "days_left": result.days_left,
    }


def staging_from_record(data: dict[str, Any]) -> StagingResult:
    expires = data.get("certificate_expires_at")
    return StagingResult(
        checked_at=parse_timestamp(data["checked_at"]),
        url=data.get("url"),
        ok=bool(data["ok"]),
        skipped=bool(data["skipped"]),
        detail=data["detail"],
        status=data.get("status"),
        certificate_expires_at=parse_timestamp(expires) if expires else None,
        days_left=data.get("days_left"),
    )


def staging_check_for(config: Config) -> StagingCheck:
    return lambda now: staging.check(config.staging_url, now=now, ca_file=config.staging_ca_file)


def staging_line(result: StagingResult) -> str:
    if result.skipped:
        return "Staging: check skipped (SVC_STAGING_URL is not set)"
    return f"Staging: {result.url} {'OK' if result.ok else 'FAILING'}: {result.detail}"


def wallet_line(state: dict[str, Any]) -> str:
    text = f"Wallet: {state['percent_used']:.1f} % used ({state['spent']:.2f} of {state['budget']:.2f})"
    return text + (", LOCKED" if state["locked"] else "")


# -- the agent --------------------------------------------------------------------------------------------


class DailyPulse:
    agent_id = PULSE_AGENT

    def __init__(
        self,
        config: Config,
        clock: Clock,
        *,
        steward: SlotSteward,
        staging_check: StagingCheck,
        outage: DatabaseOutage,
    ):
        self.config = config
        self.clock = clock
        self.steward = steward
        self.staging_check = staging_check
        self.outage = outage

    def default_mode(self) -> str:
        return "always" if self.config.ops_pulse_always else "auto"

    def run(self, trigger: Trigger, *, post_to_chat: str | None = None) -> PulseReport:
        """Check, run the slot steward, post if there is something to say, record the run; return what it found."""
        mode = post_to_chat or self.default_mode()
        if mode not in POST_MODES:
            raise ValueError(f"post_to_chat must be one of {', '.join(POST_MODES)}")
        with connection():
            started = self.clock()
            checks, issues = self._check(started)
            result = self.staging_check(self.clock())
            checks["staging"] = staging_record(result)
            if not result.ok:
                issues.append(Issue("staging", f"{result.url}: {result.detail}"))
            steward = self.steward.run(Trigger("pulse", actor=trigger.actor))
            for failed in steward.failed:
                issues.append(
                    Issue("slot_steward", f"wipe of bay {failed.slot} ({failed.ticket}) failed: {failed.detail}")
                )
            post = mode == "always" or (mode == "auto" and bool(issues))
            now = self.clock()
            message = self._message(now, issues, checks, result, steward)
            with transaction():
                remember_staging(result, at=now, by=self.agent_id)
                if post:
                    chat.queue(message, source="pulse", at=now)
                run = runs.record(
                    self.agent_id,
                    trigger=trigger,
                    started_at=started,
                    finished_at=self.clock(),
                    status="ISSUES_FOUND" if issues else "ALL_CLEAR",
                    ok=True,
                    summary=_summary(issues, post),
                    details={
                        "post_to_chat": mode,
                        "posted": post,
                        "issues": [i.as_dict() for i in issues],
                        "checks": checks,
                        "steward_run": steward.run.id,
                    },
                )
        return PulseReport(issues, post, message, steward, result, run)

    def _check(self, now: datetime) -> tuple[dict[str, Any], list[Issue]]:
        issues: list[Issue] = []
        checks: dict[str, Any] = {}
        for name, check in health(self.config, now, self.outage).checks.items():
            checks[name] = check
            if not check["ok"]:
                issues.append(Issue(name, check["detail"]))

        before = stuck_before(self.config, now)
        stuck_count = count_stuck(self.config, now)
        stuck = tickets.stuck(
            changed_before=before, live_stages=LIVE_STAGES, limit=LISTED, exclude_keys=hidden_from_needs_you()
        )
        checks["stuck"] = {"count": stuck_count, "soak_hours": self.config.stuck_after_hours}
        if stuck_count:
            issues.append(
                Issue(
                    "stuck",
                    f"{stuck_count} ticket(s) blocked or without a stage change for more than "
                    f"{self.config.stuck_after_hours:g} h: {_listed(stuck, stuck_count, now)}",
                )
            )

        hidden = hidden_from_needs_you()
        waiting_count = tickets.count_needs_you(exclude_keys=hidden)
        waiting = tickets.needs_you_oldest_first(limit=LISTED, exclude_keys=hidden)
        checks["needs_you"] = {"count": waiting_count}
        if waiting_count:
            issues.append(
                Issue("needs_you", f"{waiting_count} ticket(s) need you: {_listed(waiting, waiting_count, now)}")
            )

        state = wallet_state()
        checks["wallet"] = state
        if state["locked"]:
            issues.append(Issue("wallet", f"the wallet is locked ({state['percent_used']:.1f} % used)"))
        elif state["percent_used"] >= WALLET_WARN_PERCENT:
            issues.append(Issue("wallet", f"{state['percent_used']:.1f} % of the budget used"))
        return checks, issues

    def _message(
        self,
        now: datetime,
        issues: list[Issue],
        checks: dict[str, Any],
        result: StagingResult,
        steward: BayReport,
    ) -> str:
        day = now.strftime("%a %d %b %Y")
        if issues:
            lines = [f"**Daily pulse, {day}: {len(issues)} issue(s)**"]
            lines += [f"- {i.check}: {i.detail}" for i in issues]
        else:
            lines = [f"**Daily pulse, {day}: all clear**"]
        lines.append(staging_line(result))
        lines.append(wallet_line(checks["wallet"]))
        if steward.released:
            lines.append("Slot steward released: " + ", ".join(f"{o.slot} ({o.ticket})" for o in steward.released))
        return "\n".join(lines)


def _summary(issues: list[Issue], posted: bool) -> str:
    found = f"{len(issues)} issue(s): " + "; ".join(f"{i.check}: {i.detail}" for i in issues) if issues else "all clear"
    return found[:1900] + (" (posted to chat)" if posted else " (not posted)")


def _listed(rows: list[Ticket], total: int, now: datetime) -> str:
    text = ", ".join(f"{t.key} ({t.stage} for {duration((now - t.stage_changed_at).total_seconds())})" for t in rows)
    if total > len(rows):
        text += f" and {total - len(rows)} more"
    return text
