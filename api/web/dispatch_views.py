"""Dispatch jobs on the web board (`domain/dispatch/`): a job's own page (`/jobs/{id}`: its decision, state, bay and
worker, its times, its output read as words, what the service wrote to the forge, why anything was refused, and a
Cancel control), and how a job reads on the board's bays panel, its queue and the scorecard. It reads through the
units `GET /api/v1/dispatch/jobs/{id}` uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import falcon

from api.operations import Param
from api.web import decisions, freshness
from api.web.render import page, person, signed_in
from api.web.render import page_operation as _html
from domain.dispatch.jobs import CANCELLED, FAILED, QUEUED, RUNNING, SUCCEEDED
from domain.errors import NotFound

# Files of an output listed on its job's page; the rest are counted (an output may name 9,999).
FILES_SHOWN = 100
STATE_WORDS = {
    QUEUED: "queued: waiting for a worker's claim",
    RUNNING: "running in a bay",
    SUCCEEDED: "succeeded",
    FAILED: "failed",
    CANCELLED: "cancelled",
}
STATE_SYMBOLS = {QUEUED: "◷", RUNNING: "▶", SUCCEEDED: "✓", FAILED: "✗", CANCELLED: "○"}
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
    named = {"schema", "ticket", "role", "status", "summary", "event_id", "branch", "commits", "files_changed"}
    named |= {"pull_request", "comment"}
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
    row: Any
    state_words: str
    symbol: str
    output: Output | None
    last_heartbeat: datetime | None
    # Why it failed or was cancelled, in words (the output gate's violations, a lease that ran out, who cancelled).
    reason: str | None
    forge_pending: bool

    @property
    def cancellable(self) -> bool:
        return self.row.state in (QUEUED, RUNNING)


def describe(row: Any) -> JobView:
    output = output_of(row.result)
    return JobView(
        row=row,
        state_words=STATE_WORDS.get(row.state, row.state),
        symbol=STATE_SYMBOLS.get(row.state, "•"),
        output=output,
        last_heartbeat=row.heartbeat_at if row.state == RUNNING else None,
        reason=row.cancel_reason,
        # Accepted with changes, and the jobs process has not written (nor given up on) the pull request yet.
        forge_pending=row.state == SUCCEEDED
        and output is not None
        and output.status == "changes_ready"
        and not (row.forge_pull_request or row.forge_error),
    )


class JobPage:
    """One dispatch job: its decision, state, bay, worker, attempts and times; its output; what was written to the
    forge; why anything was refused; and, for an operator, Cancel while it is queued or running."""

    operations = {
        "GET": _html(
            "One dispatch job: its decision, state, bay and worker, its output, what the service wrote to the forge, "
            "and why anything was refused (an unknown id: a page saying so)",
            params=(Param("job_id", {"type": "string"}, "The job's id (any other text: 404).", "path", True),),
            statuses=(200, 404),
        )
    }

    def __init__(self, board, router, dispatch, clock):
        self.board, self.router, self.dispatch, self.clock = board, router, dispatch, clock

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        now = self.clock()
        row = None
        if job_id.isdigit() and len(job_id) < 19:
            try:
                row = self.dispatch.job(int(job_id))
            except NotFound:
                row = None
        # The job's own row is read anyway (by its key): what the forge write set moves the page too.
        own = (
            (row.state, row.leased_until, row.finished_at, row.forge_pull_request, row.forge_comment, row.forge_error)
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
