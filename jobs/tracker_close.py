"""Delivering `tracker_close` (queued by `mark_done` of a PORT- ticket with a tracker issue): set the Linear
issue to its team's completed state, best effort.

The close happens after the `mark_done` committed, so nothing here can undo it. Transient failures are tried
again by the outbox; the final outcome — closed, or given up and why — goes onto the ticket's timeline.
"""

from __future__ import annotations

from integrations.linear import LinearTracker, TrackerError
from jobs.delivery import RETRY, SENT, Attempt, Handler, Outcome, Recorder
from storage import tickets, timeline
from svc.clock import Clock
from svc.config import Config

KIND = "tracker_close"


def handler(config: Config) -> Handler:
    def deliver(attempt: Attempt) -> Outcome:
        if not config.tracker_api_key:
            return Outcome.give_up("SVC_TRACKER_API_KEY is no longer set: the tracker close was not sent")
        tracker = LinearTracker(config.tracker_api_url, config.tracker_api_key)
        try:
            closed = tracker.close_issue(attempt.payload["issue_id"])
        except TrackerError as exc:
            if exc.permanent:
                return Outcome.give_up(exc.detail)
            return Outcome.retry(exc.detail, after=exc.retry_after)
        finally:
            tracker.session.close()
        return Outcome.sent(closed.describe(), issue=closed.issue, state=closed.state, already=closed.already)

    return deliver


def recorder(clock: Clock) -> Recorder:
    """Put the close's final outcome on the ticket's timeline (called in the outcome's transaction)."""

    def record(attempt: Attempt, outcome: Outcome) -> None:
        key = attempt.payload["ticket"]
        if not tickets.exists(key):
            return
        issue = attempt.payload["issue_id"]
        data = {"issue_id": issue, "attempts": attempt.attempts + 1, "outcome": outcome.status, **outcome.result}
        if outcome.status == SENT:
            timeline.append(key, kind="tracker_closed", summary=outcome.detail, at=clock(), data=data)
            return
        how = f"gave up after {attempt.attempts + 1} attempts" if outcome.status == RETRY else "failed"
        timeline.append(
            key,
            kind="tracker_close_failed",
            summary=f"tracker close of {issue} {how}: {outcome.detail}; the ticket stays done",
            at=clock(),
            data={**data, "detail": outcome.detail},
        )

    return record
