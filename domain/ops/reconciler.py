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
its checkpoint stays where it was, so nothing it would have shown is skipped. A reading that reached its client's
page cap is `truncated`: what it read is asked for again, its checkpoint stays (the pages it did not read are older
than those it did), and the run's summary and the hook's row in the ledger say `truncated`. Each checkpoint is kept
in the database: the first run looks back 24 hours, and none further back than the sender keeps its log. The run
also drops the accepted delivery ids older than the senders keep theirs (3 days; GitLab's 7).

No transaction is held across a call to a sender: each call is bounded by its client's timeouts, and the jobs
process runs this agent on a worker of its own, so a slow sender holds nothing else up. Every read and write of the
ledger is a unit of work (`domain/units.py`); a ledger entry that moved between its read and its write (a redelivery
arrived meanwhile) is read again. The clients are handed in by the composition root (`jobs/assembly.py`): None for
a sender the configuration gives no token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from domain import gaps, units
from domain.clock import BadTimestamp, Clock, iso, parse_timestamp
from domain.config import Config
from domain.gaps import Gap, GapState
from domain.ops import runs
from domain.units import StaleRead
from integrations.github import DeliveryLog, HookDelivery
from integrations.gitlab import CLIENT_FAILURE, SERVER_FAILURE, EventLog, HookEvent
from integrations.linear import TrackerIssue, UpdatedIssues
from integrations.transport import TransportError
from storage import reconciliation

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


# What the reconciler asks of each sender: the clients the jobs process builds (`integrations/github.GitHub`,
# `integrations/gitlab.GitLab`, `integrations/linear.LinearTracker`), or a test's.


class GitHubHooks(Protocol):
    def deliveries_since(self, hook: str, since: datetime, *, max_pages: int = ...) -> DeliveryLog: ...

    def redeliver(self, hook: str, delivery_id: int) -> None: ...


class GitLabHooks(Protocol):
    def hook_events(
        self,
        hook: str,
        *,
        status: str,
        after_id: int | None = None,
        since: datetime | None = None,
        max_pages: int = ...,
    ) -> EventLog: ...

    def resend(self, hook: str, event_id: int) -> None: ...


class TrackerIssues(Protocol):
    def issues_updated_since(
        self, tracked: Iterable[str], since: datetime, *, max_pages: int = ...
    ) -> UpdatedIssues: ...


class CatchUp(Protocol):
    def __call__(self, issues: list[TrackerIssue]) -> Sequence[object]: ...


@dataclass
class ReconcileReport:
    """What one run did: what it asked for again, what it could not read (`failures`, each naming the hook or
    sender and why), which readings the page cap cut short (`truncated`), and the run it recorded."""

    asked: int = 0
    given_up: int = 0
    refused_by_us: int = 0
    already_accepted: int = 0
    deferred: int = 0
    caught_up: int = 0
    failures: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    hooks: dict[str, dict[str, Any]] = field(default_factory=dict)
    run: runs.AgentRun | None = None

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
        if self.truncated:
            text += f"; {gaps.TRUNCATED} (the page cap was reached, the checkpoint kept): " + "; ".join(self.truncated)
        if self.failures:
            text += "; could not read: " + "; ".join(self.failures)
        return text[:2000]

    def details(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "given_up": self.given_up,
            "refused_by_us": self.refused_by_us,
            "already_accepted": self.already_accepted,
            "deferred": self.deferred,
            "caught_up": self.caught_up,
            "failures": self.failures,
            "truncated": self.truncated,
            "hooks": self.hooks,
        }


class Budget:
    """The asks one run may still make (`SVC_RECONCILE_MAX`), shared by every hook it reads."""

    def __init__(self, most: int):
        self.left = most

    def has_room(self) -> bool:
        return self.left > 0

    def spend(self) -> None:
        self.left -= 1


@dataclass(frozen=True)
class Missing:
    """A delivery a sender's hook says it failed to make: the sender's id of its latest attempt, what that got, and
    whether the service refused it on purpose (GitLab's `client_failure`: listed, never asked for again)."""

    sender: str
    hook: str
    guid: str
    delivery_id: int
    event: str | None
    detail: str
    refused: bool = False


class Reconciler:
    def __init__(
        self,
        config: Config,
        clock: Clock,
        *,
        github: GitHubHooks | None = None,
        gitlab: GitLabHooks | None = None,
        tracker: TrackerIssues | None = None,
        catch_up: CatchUp | None = None,
        max_pages: int | None = None,
    ):
        """The clients as the composition root builds them (None: that sender has no token, and each of its hooks
        fails the run saying so); `catch_up` routes the tracker's missed state changes (the router's);
        `max_pages`, when given, the page cap of every reading instead of each client's own."""
        self.config = config
        self.clock = clock
        self.github = github
        self.gitlab = gitlab
        self.tracker = tracker
        self.catch_up = catch_up
        self.pages = {} if max_pages is None else {"max_pages": max_pages}

    def __call__(self, trigger: runs.Trigger) -> ReconcileReport:
        """Run once; record the run; return what it did."""
        started = self.clock()
        report = ReconcileReport()
        budget = Budget(self.config.reconcile_max)
        checkpoints = units.run(reconciliation.checkpoints, what="the reconciler's checkpoints")
        moved: dict[str, Any] = {}
        for hook in self.config.github_hooks:
            self._github_hook(hook, checkpoints, moved, report, budget)
        for hook in self.config.gitlab_hooks:
            self._gitlab_hook(hook, checkpoints, moved, report, budget)
        if self.tracker is not None and self.catch_up is not None:
            self._tracker(checkpoints, moved, report)
        report.run = units.run(lambda: self._record(trigger, started, moved, report), what="the reconciler's run")
        return report

    def _record(
        self, trigger: runs.Trigger, started: datetime, moved: dict[str, Any], report: ReconcileReport
    ) -> runs.AgentRun:
        finished = self.clock()
        if moved:
            reconciliation.save_checkpoints(moved, at=finished)
        dropped = {sender: reconciliation.forget_before(sender, finished - kept) for sender, kept in KEPT.items()}
        configured = self.config.github_hooks or self.config.gitlab_hooks or self.tracker is not None
        return runs.record(
            AGENT_ID,
            trigger=trigger,
            started_at=started,
            finished_at=finished,
            status="OK" if report.ok else "FAILED",
            ok=report.ok,
            summary=report.summary() if configured else "nothing to reconcile: no hooks or tracker set",
            details={**report.details(), "forgotten_delivery_ids": dropped},
        )

    # -- GitHub -----------------------------------------------------------------------------------------

    def _github_hook(
        self, hook: str, checkpoints: dict[str, Any], moved: dict[str, Any], report: ReconcileReport, budget: Budget
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
            found = self.github.deliveries_since(hook, since, **self.pages)
        except TransportError as exc:
            self._unreadable("github", hook, exc.detail, report)
            return
        for problem in found.malformed:
            self._unreadable("github", hook, problem, report)
        if found.truncated:
            self._truncated("github", hook, f"its deliveries since {iso(since)}", report)
        by_guid: dict[str, list[HookDelivery]] = {}
        for delivery in found.deliveries:  # newest first
            by_guid.setdefault(delivery.guid, []).append(delivery)
        missing = [
            _github_missing(hook, guid, attempts)
            for guid, attempts in by_guid.items()
            if not any(d.answered_2xx for d in attempts)
        ]
        seen["deliveries"], seen["missing"] = len(found.deliveries), len(missing)
        complete = self._settle(missing, lambda gap: self.github.redeliver(hook, gap.delivery_id), report, budget)
        if complete and not found.malformed and not found.truncated:
            moved[key] = _advanced(checkpoints.get(key), [d.delivered_at for d in found.deliveries], now)

    # -- GitLab -----------------------------------------------------------------------------------------

    def _gitlab_hook(
        self, hook: str, checkpoints: dict[str, Any], moved: dict[str, Any], report: ReconcileReport, budget: Budget
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
            failed = self.gitlab.hook_events(hook, status=SERVER_FAILURE, after_id=after_id, since=since, **self.pages)
            refused = self.gitlab.hook_events(hook, status=CLIENT_FAILURE, after_id=after_id, since=since, **self.pages)
        except TransportError as exc:
            self._unreadable("gitlab", hook, exc.detail, report)
            return
        for problem in (*failed.malformed, *refused.malformed):
            self._unreadable("gitlab", hook, problem, report)
        for reading, status in ((failed, SERVER_FAILURE), (refused, CLIENT_FAILURE)):
            if reading.truncated:
                self._truncated("gitlab", hook, f"its {status} events after {after_id or 'the first'}", report)
        missing = {
            m.guid: m
            for events, refused_here in ((refused.events, True), (failed.events, False))
            for m in _gitlab_missing(hook, events, refused=refused_here)
        }
        seen["server_failures"], seen["client_failures"] = len(failed.events), len(refused.events)
        complete = self._settle(
            list(missing.values()), lambda gap: self.gitlab.resend(hook, gap.delivery_id), report, budget
        )
        clean = not (failed.malformed or refused.malformed or failed.truncated or refused.truncated)
        if complete and clean:
            newest = max([*(e.id for e in (*failed.events, *refused.events)), after_id or 0])
            if newest:
                moved[key] = newest

    # -- both forges: what is missing, asked for again -------------------------------------------------

    def _settle(
        self, missing: list[Missing], ask: Callable[[Missing], None], report: ReconcileReport, budget: Budget
    ) -> bool:
        """Ask again for each of `missing` the service never accepted, as the ledger allows; False when one was left
        for a later run (the run's maximum) or could not be asked for (the checkpoint then stays)."""
        if not missing:
            return True
        sender, hook, guids = missing[0].sender, missing[0].hook, [m.guid for m in missing]
        accepted, ledger = units.run(
            lambda: (reconciliation.known(sender, guids), reconciliation.gaps(sender, hook, guids)),
            what="the reconciliation ledger",
        )
        complete = True
        for gap in missing:
            row = Gap.of(ledger[gap.guid]) if gap.guid in ledger else None
            if gap.guid in accepted:
                report.already_accepted += 1
            elif row is not None and row.state in gaps.SETTLED:
                continue
            elif gap.refused:
                self._enter(gap, GapState.REFUSED_BY_US, 0, f"{gap.detail}: refused by this service on purpose")
                report.refused_by_us += 1
            elif row is not None and row.attempts >= MAX_ATTEMPTS:
                detail = f"{gap.detail}; asked {row.attempts} times, never accepted: given up"
                self._enter(gap, GapState.GIVEN_UP, row.attempts, detail)
                report.given_up += 1
            elif not budget.has_room():
                report.deferred += 1
                complete = False
            else:
                complete = self._ask(gap, row.attempts if row is not None else 0, ask, report, budget) and complete
        return complete

    def _ask(
        self, gap: Missing, attempts: int, ask: Callable[[Missing], None], report: ReconcileReport, budget: Budget
    ) -> bool:
        """Ask the sender for `gap` again and enter what came of it; False when it could not be asked for."""
        try:
            ask(gap)
        except TransportError as exc:
            if exc.permanent:
                self._enter(gap, GapState.GIVEN_UP, attempts, exc.detail)
                report.given_up += 1
            report.failures.append(f"{gap.sender} {gap.hook}: asking again for {gap.guid}: {exc.detail}")
            return False
        budget.spend()
        report.asked += 1
        detail = f"{gap.detail}; asked again (attempt {attempts + 1} of {MAX_ATTEMPTS})"
        self._enter(gap, GapState.REDELIVERED, attempts + 1, detail)
        return True

    def _enter(self, gap: Missing, state: GapState, attempts: int, detail: str) -> None:
        """Enter `gap` in the ledger in `state`, from its row as it is now: a redelivery that already arrived makes
        it `recovered` (its arrival, `gaps.delivery_arrived`, may have come between the ask and this line), and a
        recovered gap stays recovered. A row that moved between the read and the compare-and-swap is read again."""

        def unit() -> None:
            at = self.clock()
            row = reconciliation.gap(gap.sender, gap.hook, gap.guid)
            arrived = state is GapState.REDELIVERED and bool(reconciliation.known(gap.sender, [gap.guid]))
            now_state, now_detail = state, detail
            if arrived or (row is not None and row.state == GapState.RECOVERED):
                now_state, now_detail = GapState.RECOVERED, f"{detail}; the redelivery arrived and was recorded"
            if row is None:
                reconciliation.open_gap(
                    sender=gap.sender,
                    hook=gap.hook,
                    delivery=str(gap.delivery_id),
                    guid=gap.guid,
                    event=gap.event,
                    state=now_state,
                    attempts=attempts,
                    detail=now_detail,
                    at=at,
                    race=True,
                )
            elif not reconciliation.update_gap(
                row.id,
                was=row.state,
                state=now_state,
                attempts=attempts,
                detail=now_detail,
                at=at,
                delivery=str(gap.delivery_id),
            ):
                raise StaleRead(f"the ledger's gap {row.id} moved meanwhile")

        units.run(unit, what=f"the ledger's entry of {gap.sender} delivery {gap.guid}")

    # -- Linear -----------------------------------------------------------------------------------------

    def _tracker(self, checkpoints: dict[str, Any], moved: dict[str, Any], report: ReconcileReport) -> None:
        now = self.clock()
        since = _since(checkpoints.get(TRACKER_CHECKPOINT), now, KEPT["linear"])
        seen: dict[str, Any] = {"since": iso(since)}
        report.hooks[TRACKER_CHECKPOINT] = seen
        tracked = units.run(reconciliation.tracked_issue_ids, what="the tracked issues")
        seen["tracked"] = len(tracked)
        if not tracked:
            return
        try:
            found = self.tracker.issues_updated_since(tracked, since, **self.pages)
        except TransportError as exc:
            self._unreadable("linear", gaps.TRACKER_HOOK, exc.detail, report)
            return
        caught = self.catch_up(found.issues)
        report.caught_up += len(caught)
        seen["updated"], seen["routed"] = len(found.issues), len(caught)
        if found.truncated:
            self._truncated("linear", gaps.TRACKER_HOOK, f"the tracked issues updated since {iso(since)}", report)
            return
        updates = [i.updated_at for i in found.issues]
        moved[TRACKER_CHECKPOINT] = _advanced(checkpoints.get(TRACKER_CHECKPOINT), updates, now)

    # -- what could not be read, or only in part ------------------------------------------------------

    def _unreadable(self, sender: str, hook: str, detail: str, report: ReconcileReport) -> None:
        report.failures.append(f"{sender} {hook}: {detail}")
        log.warning("reconciler could not read a sender", extra={"sender": sender, "hook": hook, "detail": detail})
        units.run(lambda: gaps.hook_needs_a_look(sender, hook, detail, at=self.clock()), what="the ledger")

    def _truncated(self, sender: str, hook: str, what: str, report: ReconcileReport) -> None:
        detail = f"{gaps.TRUNCATED}: the page cap was reached reading {what}; the checkpoint stays for the next run"
        report.truncated.append(f"{sender} {hook}")
        log.warning("reconciler reading truncated", extra={"sender": sender, "hook": hook, "detail": detail})
        units.run(lambda: gaps.hook_needs_a_look(sender, hook, detail, at=self.clock()), what="the ledger")


def _github_missing(hook: str, guid: str, attempts: list[HookDelivery]) -> Missing:
    latest = attempts[0]
    got = f"status {latest.status_code}" if latest.status_code else "no answer"
    event = f"{latest.event}.{latest.action}" if latest.event and latest.action else latest.event
    return Missing("github", hook, guid, latest.id, event[:64] if event else None, f"GitHub's delivery got {got}")


def _gitlab_missing(hook: str, events: list[HookEvent], *, refused: bool) -> list[Missing]:
    """The latest attempt of each event (grouped by guid) of one status."""
    latest: dict[str, HookEvent] = {}
    for event in events:  # newest first
        latest.setdefault(event.guid or "", event)
    return [
        Missing("gitlab", hook, guid, e.id, e.trigger, f"GitLab's delivery got {e.response_status}", refused=refused)
        for guid, e in latest.items()
    ]


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
    """A stored checkpoint's moment, or None (none yet, or not a time)."""
    try:
        return parse_timestamp(value) if isinstance(value, str) else None
    except BadTimestamp:
        return None
