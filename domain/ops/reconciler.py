"""The reconciler (agent `reconciler`, every 10 minutes; `svc reconcile` runs it once): asks the senders for what
they failed to deliver.

A delivery this service refused during an outage (503), or that never reached it, is lost unless someone asks
again: GitHub never retries one and keeps its log 3 days; GitLab keeps 7; Linear gives up after a few hours. Each
run reads, for each sender it is configured for, what the sender says it delivered since that hook's checkpoint,
finds what the service never accepted (`storage/reconciliation.py` keeps the ids it accepted), and asks again:

- GitHub, each hook of `SVC_GITHUB_HOOKS`: its deliveries, grouped by `guid`. A guid none of whose deliveries got
  a 2xx and that the service never accepted is redelivered once a run, at most 3 times in all (then `given_up`),
  at most `SVC_RECONCILE_MAX` a run, whatever it got (the contract's rule: a delivery refused for a wrong secret
  is recovered once the hook's secret is put right, since GitHub signs each attempt with the hook's secret).
- GitLab, each hook of `SVC_GITLAB_HOOKS`: its `server_failure` events are resent the same way (paced by
  `integrations/gitlab.py` within GitLab's five a minute); its `client_failure` events are `refused_by_us`.
- Linear: the board's tracked issues updated since the checkpoint; a state change no tracker event recorded is
  routed as a `poller` envelope (`domain/router/reconciliation.py`, handed in as `catch_up`).

A hook or sender that cannot be read (a refused token, an unknown hook, a timeout, a 5xx, a malformed page or
record, a bad cursor) fails the run after every other one was read, is named in its summary, and is in the ledger;
its checkpoint stays where it was, so nothing it would have shown is skipped. Each checkpoint is kept in the
database: the first run looks back 24 hours, and none further back than the sender keeps its log. The run also
drops the accepted delivery ids older than the senders keep theirs (3 days; GitLab's 7).

No transaction is held across a call to a sender: each call is bounded by its client's timeouts, and the jobs
process runs this agent on a worker of its own, so a slow sender holds nothing else up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from domain.clock import Clock, iso
from domain.config import Config
from domain.ops import runs
from integrations.github import GitHub, HookDelivery
from integrations.gitlab import CLIENT_FAILURE, SERVER_FAILURE, GitLab, HookEvent
from integrations.linear import LinearTracker, TrackerIssue
from integrations.transport import TransportError
from storage import reconciliation
from storage.db import transaction

log = logging.getLogger("svc.reconciler")

AGENT_ID = "reconciler"
MAX_ATTEMPTS = 3
FIRST_LOOK_BACK = timedelta(hours=24)
# How long each sender keeps its delivery log: never read (nor keep our ids) further back than that.
KEPT = {"github": timedelta(days=3), "gitlab": timedelta(days=7), "linear": timedelta(days=3)}
# Each read starts this much before the checkpoint: a delivery logged a moment after the sender answered the last
# read, with an earlier time, is still seen. What is read twice is recognised by the ledger.
OVERLAP = timedelta(minutes=10)
TRACKER_CHECKPOINT = "linear"


class CatchUp(Protocol):
    def __call__(self, issues: list[TrackerIssue]) -> list[Any]: ...


@dataclass
class ReconcileReport:
    """What one run did: what it asked for again and what it could not read (`failures`, each naming the hook or
    sender and why), and the run it recorded."""

    asked: int = 0
    given_up: int = 0
    refused_by_us: int = 0
    already_accepted: int = 0
    deferred: int = 0
    caught_up: int = 0
    failures: list[str] = field(default_factory=list)
    hooks: dict[str, dict[str, Any]] = field(default_factory=dict)
    run: Any = None

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        parts = [
            f"asked again for {self.asked}",
            f"gave up {self.given_up}",
            f"refused by us {self.refused_by_us}",
            f"routed {self.caught_up} missed tracker change(s)",
        ]
        if self.deferred:
            parts.append(f"{self.deferred} left for the next run (at most the run's maximum a run)")
        text = "; ".join(parts)
        if self.failures:
            text += "; could not read: " + "; ".join(self.failures)
        return text[:2000]


class Reconciler:
    def __init__(
        self,
        config: Config,
        clock: Clock,
        *,
        github: GitHub | None = None,
        gitlab: GitLab | None = None,
        tracker: LinearTracker | None = None,
        catch_up: CatchUp | None = None,
    ):
        """The clients default to those the configuration names (None where it names no token); `catch_up` routes
        the tracker's missed state changes (the composition root hands in the router's)."""
        self.config = config
        self.clock = clock
        self.github = github or (
            GitHub(config.github_api_url, config.github_api_token) if config.github_api_token else None
        )
        self.gitlab = gitlab or (
            GitLab(config.gitlab_api_url, config.gitlab_api_token) if config.gitlab_api_token else None
        )
        self.tracker = tracker or (
            LinearTracker(config.tracker_api_url, config.tracker_api_key) if config.tracker_api_key else None
        )
        self.catch_up = catch_up

    def __call__(self, trigger: runs.Trigger) -> ReconcileReport:
        """Run once; record the run; return what it did."""
        started = self.clock()
        report = ReconcileReport()
        budget = [self.config.reconcile_max]
        with transaction():
            checkpoints = reconciliation.checkpoints()
        moved: dict[str, Any] = {}
        for hook in self.config.github_hooks:
            self._github_hook(hook, checkpoints, moved, report, budget)
        for hook in self.config.gitlab_hooks:
            self._gitlab_hook(hook, checkpoints, moved, report, budget)
        if self.tracker is not None and self.catch_up is not None:
            self._tracker(checkpoints, moved, report)
        finished = self.clock()
        with transaction():
            if moved:
                reconciliation.save_checkpoints(moved, at=finished)
            dropped = {sender: reconciliation.forget_before(sender, finished - kept) for sender, kept in KEPT.items()}
            report.run = runs.record(
                AGENT_ID,
                trigger=trigger,
                started_at=started,
                finished_at=finished,
                status="OK" if report.ok else "FAILED",
                ok=report.ok,
                summary=report.summary() if self._configured() else "nothing to reconcile: no hooks or tracker set",
                details={
                    "asked": report.asked,
                    "given_up": report.given_up,
                    "refused_by_us": report.refused_by_us,
                    "already_accepted": report.already_accepted,
                    "deferred": report.deferred,
                    "caught_up": report.caught_up,
                    "failures": report.failures,
                    "hooks": report.hooks,
                    "forgotten_delivery_ids": dropped,
                },
            )
        return report

    def _configured(self) -> bool:
        return bool(self.config.github_hooks or self.config.gitlab_hooks or self.tracker is not None)

    # -- GitHub -----------------------------------------------------------------------------------------

    def _github_hook(
        self, hook: str, checkpoints: dict[str, Any], moved: dict[str, Any], report: ReconcileReport, budget: list[int]
    ) -> None:
        key = f"github:{hook}"
        now = self.clock()
        since = _since(checkpoints.get(key), now, KEPT["github"])
        seen: dict[str, Any] = {"since": iso(since)}
        report.hooks[key] = seen
        if self.github is None:
            self._unreadable("github", hook, "SVC_GITHUB_TOKEN is not set", report)
            return
        try:
            found = self.github.deliveries_since(hook, since)
        except TransportError as exc:
            self._unreadable("github", hook, exc.detail, report)
            return
        for problem in found.malformed:
            self._unreadable("github", hook, problem, report)
        by_guid: dict[str, list[HookDelivery]] = {}
        for delivery in found.deliveries:  # newest first
            by_guid.setdefault(delivery.guid, []).append(delivery)
        missing = {guid: attempts for guid, attempts in by_guid.items() if not any(d.answered_2xx for d in attempts)}
        seen["deliveries"], seen["missing"] = len(found.deliveries), len(missing)
        complete = self._settle(
            "github",
            hook,
            {guid: _github_gap(attempts) for guid, attempts in missing.items()},
            lambda gap: self.github.redeliver(hook, gap.delivery_id),
            report,
            budget,
        )
        if complete and not found.malformed:
            moved[key] = _advanced(checkpoints.get(key), [d.delivered_at for d in found.deliveries], now)

    # -- GitLab -----------------------------------------------------------------------------------------

    def _gitlab_hook(
        self, hook: str, checkpoints: dict[str, Any], moved: dict[str, Any], report: ReconcileReport, budget: list[int]
    ) -> None:
        key = f"gitlab:{hook}"
        now = self.clock()
        after_id = checkpoints.get(key) if isinstance(checkpoints.get(key), int) else None
        # Without a checkpoint, 24 hours where GitLab lists the events' times; GitLab itself lists 7 days at most.
        since = now - FIRST_LOOK_BACK if after_id is None else now - KEPT["gitlab"]
        seen: dict[str, Any] = {"after_event": after_id}
        report.hooks[key] = seen
        if self.gitlab is None:
            self._unreadable("gitlab", hook, "SVC_GITLAB_TOKEN is not set", report)
            return
        try:
            failed = self.gitlab.hook_events(hook, status=SERVER_FAILURE, after_id=after_id, since=since)
            refused = self.gitlab.hook_events(hook, status=CLIENT_FAILURE, after_id=after_id, since=since)
        except TransportError as exc:
            self._unreadable("gitlab", hook, exc.detail, report)
            return
        for problem in (*failed.malformed, *refused.malformed):
            self._unreadable("gitlab", hook, problem, report)
        gaps: dict[str, _Gap] = {}
        for events, refused_here in ((refused.events, True), (failed.events, False)):
            grouped: dict[str, list[HookEvent]] = {}
            for event in events:  # newest first
                grouped.setdefault(event.guid or "", []).append(event)
            for guid, attempts in grouped.items():
                latest = attempts[0]
                gaps[guid] = _Gap(
                    delivery_id=latest.id,
                    event=latest.trigger,
                    refused=refused_here,
                    detail=f"GitLab's delivery got {latest.response_status}",
                )
        seen["server_failures"], seen["client_failures"] = len(failed.events), len(refused.events)
        complete = self._settle(
            "gitlab", hook, gaps, lambda gap: self.gitlab.resend(hook, gap.delivery_id), report, budget
        )
        if complete and not failed.malformed and not refused.malformed:
            ids = [e.id for e in (*failed.events, *refused.events)]
            newest = max([*ids, after_id or 0])
            if newest:
                moved[key] = newest

    # -- both forges: what is missing, asked for again -------------------------------------------------

    def _settle(
        self,
        sender: str,
        hook: str,
        missing: dict[str, _Gap],
        ask: Callable[[_Gap], None],
        report: ReconcileReport,
        budget: list[int],
    ) -> bool:
        """Ask again for each guid in `missing` the service never accepted, as the ledger allows; False when one
        was left for a later run (the run's maximum) or could not be asked for (the checkpoint then stays)."""
        if not missing:
            return True
        with transaction():
            accepted = reconciliation.known(sender, missing)
            ledger = reconciliation.gaps(sender, hook, missing)
        complete = True
        for guid, gap in missing.items():
            row = ledger.get(guid)
            if guid in accepted:
                report.already_accepted += 1
                continue
            if row is not None and row.state in ("given_up", "refused_by_us", "recovered"):
                continue
            at = self.clock()
            if gap.refused:
                with transaction():
                    reconciliation.open_gap(
                        sender=sender,
                        hook=hook,
                        delivery=str(gap.delivery_id),
                        guid=guid,
                        event=gap.event,
                        state="refused_by_us",
                        attempts=0,
                        detail=f"{gap.detail}: refused by this service on purpose, not asked for again",
                        at=at,
                    )
                report.refused_by_us += 1
                continue
            attempts = row.attempts if row is not None else 0
            if attempts >= MAX_ATTEMPTS:
                with transaction():
                    reconciliation.update_gap(
                        row.id,
                        was=row.state,
                        state="given_up",
                        attempts=attempts,
                        detail=f"{gap.detail}; asked {attempts} times, never accepted: given up",
                        at=at,
                    )
                report.given_up += 1
                continue
            if budget[0] <= 0:
                report.deferred += 1
                complete = False
                continue
            try:
                ask(gap)
            except TransportError as exc:
                complete = False
                if exc.permanent:
                    self._record_ask(sender, hook, guid, gap, row, "given_up", attempts, exc.detail, at)
                    report.given_up += 1
                report.failures.append(f"{sender} {hook}: asking again for {guid}: {exc.detail}")
                continue
            budget[0] -= 1
            report.asked += 1
            detail = f"{gap.detail}; asked again (attempt {attempts + 1} of {MAX_ATTEMPTS})"
            self._record_ask(sender, hook, guid, gap, row, "redelivered", attempts + 1, detail, at)
        return complete

    def _record_ask(self, sender, hook, guid, gap, row, state, attempts, detail, at) -> None:
        with transaction():
            was = row.state if row is not None else None
            if state == "redelivered" and reconciliation.known(sender, [guid]):
                # The sender delivered it again before this line: it arrived, was recorded, and its arrival already
                # marked the gap recovered (`mark_recovered`); this ask still counts among its attempts.
                state, detail = "recovered", f"{detail}; the redelivery arrived and was recorded"
                was = "recovered"
            if row is None:
                reconciliation.open_gap(
                    sender=sender,
                    hook=hook,
                    delivery=str(gap.delivery_id),
                    guid=guid,
                    event=gap.event,
                    state=state,
                    attempts=attempts,
                    detail=detail,
                    at=at,
                )
            else:
                reconciliation.update_gap(
                    row.id,
                    was=was,
                    state=state,
                    attempts=attempts,
                    detail=detail,
                    at=at,
                    delivery=str(gap.delivery_id),
                )

    # -- Linear -----------------------------------------------------------------------------------------

    def _tracker(self, checkpoints: dict[str, Any], moved: dict[str, Any], report: ReconcileReport) -> None:
        now = self.clock()
        since = _since(checkpoints.get(TRACKER_CHECKPOINT), now, KEPT["linear"])
        seen: dict[str, Any] = {"since": iso(since)}
        report.hooks[TRACKER_CHECKPOINT] = seen
        with transaction():
            tracked = reconciliation.tracked_issue_ids()
        seen["tracked"] = len(tracked)
        if not tracked:
            return
        try:
            issues = self.tracker.issues_updated_since(tracked, since)
        except TransportError as exc:
            self._unreadable("linear", "issues", exc.detail, report)
            return
        caught = self.catch_up(issues)
        report.caught_up += len(caught)
        seen["updated"], seen["routed"] = len(issues), len(caught)
        moved[TRACKER_CHECKPOINT] = _advanced(checkpoints.get(TRACKER_CHECKPOINT), [i.updated_at for i in issues], now)

    # -- what could not be read -------------------------------------------------------------------------

    def _unreadable(self, sender: str, hook: str, detail: str, report: ReconcileReport) -> None:
        report.failures.append(f"{sender} {hook}: {detail}")
        log.warning("reconciler could not read a sender", extra={"sender": sender, "hook": hook, "detail": detail})
        with transaction():
            reconciliation.hook_unreadable(sender, hook, detail[:1000], at=self.clock())


@dataclass(frozen=True)
class _Gap:
    """What the reconciler asks again for: the sender's id of the latest attempt, and what it got."""

    delivery_id: int
    event: str | None
    refused: bool
    detail: str


def _github_gap(attempts: list[HookDelivery]) -> _Gap:
    latest = attempts[0]
    got = f"status {latest.status_code}" if latest.status_code else "no answer"
    event = f"{latest.event}.{latest.action}" if latest.event and latest.action else latest.event
    return _Gap(latest.id, event[:64] if event else None, False, f"GitHub's delivery got {got}")


def _since(checkpoint: Any, now: datetime, kept: timedelta) -> datetime:
    """Where a read starts: a little before the checkpoint, else 24 hours back; never before the sender's log."""
    moment = _moment(checkpoint)
    start = moment - OVERLAP if moment is not None else now - FIRST_LOOK_BACK
    return max(start, now - kept)


def _advanced(checkpoint: Any, seen: list[datetime], read_at: datetime) -> str:
    """The checkpoint after a complete read: the newest time the sender listed (its own clock), or, when it listed
    nothing, the time of the read; never behind where it was."""
    candidates = [*seen] if seen else [read_at]
    previous = _moment(checkpoint)
    if previous is not None:
        candidates.append(previous)
    return iso(max(candidates))


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None
