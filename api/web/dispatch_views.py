"""Dispatch jobs on the web board (`domain/dispatch/`): a job's own page (`/jobs/{id}`: its decision, state, bay and
worker, its times, its output read as words, what the service wrote to the forge and what became of it, why it
failed, and for an operator Cancel, Run again and Retry the forge write), and how a job reads on the board's bays
panel, its queue (saying why each job waits) and the scorecard. It reads through the units `GET
/api/v1/dispatch/jobs/{id}` uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import falcon

from api import params
from api.operations import Param
from api.web import decisions, freshness
from api.web.render import page, person, signed_in
from api.web.render import page_operation as _html
from contracts.envelope import CHANGES_READY, WORKER_OUTPUT_MEMBERS
from domain.errors import NotFound
from machines import forge_write
from machines.job import CANCELLABLE, CANCELLED, FAILED, HELD, QUEUED, RETRYABLE, RUNNING, SUCCEEDED
from storage.jobs import Job

# Files of an output listed on its job's page; the rest are counted (an output may name 9,999).
FILES_SHOWN = 100
STATE_WORDS = {
    QUEUED: "queued: waiting for a worker's claim",
    HELD: "held: dispatch is paused; it is queued when it resumes",
    RUNNING: "running in a bay",
    SUCCEEDED: "succeeded",
    FAILED: "failed",
    CANCELLED: "cancelled",
}
STATE_SYMBOLS = {QUEUED: "◷", HELD: "⏸", RUNNING: "▶", SUCCEEDED: "✓", FAILED: "✗", CANCELLED: "○"}
# What became of a job's forge write, in words (`forge.state`).
FORGE_WORDS = {
    forge_write.NONE: "nothing to write",
    forge_write.HELD: "held: dispatch is paused; it goes out when it resumes",
    forge_write.PENDING: "queued: the jobs process writes it with the service's own credentials",
    forge_write.WRITTEN: "written",
    forge_write.FAILED: "failed: nothing more was written",
    forge_write.DROPPED: "dropped: its ticket was finished before it went out",
}
# Why a failure happened, in words (`failure.kind`).
FAILURE_WORDS = {
    "output": "its output was refused",
    "worker": "the worker said it failed",
    "lease": "its lease ran out too often",
    "forge": "the forge refused its write",
    "cancelled": "it was cancelled",
}
# What moves a job's page besides its own row: its ticket (on the board or not) and its decision's page link.
PARTS = ("jobs", "tickets")


@dataclass(frozen=True)
class Output:
    """A worker's output (`svc.worker-output/v0`, as the job keeps it) read for people: each member the contract
    names, the files cut to `FILES_SHOWN`, and anything that was not even an object said so."""

    status: str | None
    summary: str | None
    branch: str | None
    commits: list[dict[str, str]]
    files: list[str]
    files_more: int
    pull_request: dict[str, Any] | None
    comment: str | None
    not_an_object: str | None = None
    others: dict[str, Any] = field(default_factory=dict)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def output_of(result: Any) -> Output | None:
    if not isinstance(result, dict):
        return None
    if set(result) == {"not_an_object"}:
        return Output(None, None, None, [], [], 0, None, None, not_an_object=str(result["not_an_object"]))
    commits = [
        {"sha": str(c.get("sha", "")), "message": str(c.get("message", ""))}
        for c in result.get("commits") or []
        if isinstance(c, dict)
    ]
    files = [str(f) for f in result.get("files_changed") or [] if isinstance(f, str | int | float)]
    pull_request = result.get("pull_request") if isinstance(result.get("pull_request"), dict) else None
    named = set(WORKER_OUTPUT_MEMBERS)
    return Output(
        status=_text(result.get("status")),
        summary=_text(result.get("summary")),
        branch=_text(result.get("branch")),
        commits=commits,
        files=files[:FILES_SHOWN],
        files_more=max(0, len(files) - FILES_SHOWN),
        pull_request=pull_request,
        comment=_text(result.get("comment")),
        others={key: value for key, value in result.items() if key not in named},
    )


@dataclass(frozen=True)
class JobView:
    row: Job
    state_words: str
    symbol: str
    output: Output | None
    last_heartbeat: datetime | None
    # Why it failed or was cancelled, in words (the output gate's violations, a lease that ran out, who cancelled,
    # the forge's own words), and what kind of failure that was.
    reason: str | None
    failure_words: str | None
    forge_words: str

    @property
    def cancellable(self) -> bool:
        return self.row.state in CANCELLABLE

    @property
    def retryable(self) -> bool:
        """An operator may run it again (a new job): it failed or was cancelled."""
        return self.row.state in RETRYABLE

    @property
    def forge_retryable(self) -> bool:
        return self.row.forge_state == forge_write.FAILED

    @property
    def forge_pending(self) -> bool:
        """Accepted with changes, and the jobs process has not written (nor given up on) the pull request yet."""
        return (
            self.row.forge_state in (forge_write.PENDING, forge_write.HELD)
            and self.output is not None
            and (self.output.status == CHANGES_READY)
        )


def describe(row: Job) -> JobView:
    return JobView(
        row=row,
        state_words=STATE_WORDS.get(row.state, row.state),
        symbol=STATE_SYMBOLS.get(row.state, "•"),
        output=output_of(row.result),
        last_heartbeat=row.heartbeat_at if row.state == RUNNING else None,
        reason=row.failure_detail,
        failure_words=FAILURE_WORDS.get(row.failure_kind or ""),
        forge_words=FORGE_WORDS.get(row.forge_state, row.forge_state),
    )


class JobPage:
    """One dispatch job: its decision, state, bay, worker, attempts and times; its output; what was written to the
    forge; why anything was refused; and, for an operator, Cancel while it is queued or running."""

    operations = {
        "GET": _html(
            "One dispatch job: its decision, state, bay and worker, its output, what the service wrote to the forge "
            "and what became of it, why it failed, and for an operator Cancel, Run again and Retry the forge write "
            "(an unknown id, or one that is not ASCII digits: a page saying so)",
            params=(Param("job_id", {"type": "string"}, "The job's id (any other text: 404).", "path", True),),
            statuses=(200, 404),
        )
    }

    def __init__(self, board, router, dispatch, clock):
        self.board, self.router, self.dispatch, self.clock = board, router, dispatch, clock

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        now = self.clock()
        try:
            row = self.dispatch.job(params.job_id(job_id))
        except NotFound:
            row = None
        # The job's own row is read anyway (by its key): what the forge write set moves the page too.
        own = (
            (
                row.state,
                row.leased_until,
                row.finished_at,
                row.forge_state,
                row.forge_pull_request,
                row.forge_comment,
                row.forge_error,
            )
            if row is not None
            else None
        )
        tag = freshness.etag(marks=self.board.marks(PARTS), now=now, person=person(req), extra=(job_id, own))
        if freshness.unchanged(req, resp, tag, exists=row is not None):
            return
        if row is None:
            resp.delete_header("ETag")
            resp.status = falcon.HTTP_404
            page(resp, "job.html", now=now, job_id=job_id, j=None, **signed_in(req))
            return
        decision = self.router.decision(row.decision_id)
        on_board = self.board.on_board({row.ticket})
        page(
            resp,
            "job.html",
            now=now,
            etag=tag,
            job_id=job_id,
            j=describe(row),
            decision=decisions.describe(decision, on_board) if decision is not None else None,
            ticket_on_board=row.ticket in on_board,
            lease_seconds=int(self.dispatch.lease.total_seconds()),
            **signed_in(req),
        )
