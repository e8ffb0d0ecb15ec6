"""The forge writes of a job whose output passed the gate with `changes_ready`: what is to be written, and what
became of it. The jobs process makes the calls (`jobs/forge_writes.py`, through `integrations/github.py` and
`integrations/gitlab.py`, with the service's own token: a worker never holds one); each step's outcome is recorded
here in its own unit of work, the pull request's address as soon as it exists, so a retry never opens a second one.

Where: the dispatching envelope's `subject.repo`, on GitLab when the event came from GitLab (its id or its actor's
says `gitlab:`), else on GitHub. What: the output's pull request title and body, neutralized (`neutralize`: nobody
pinged, nothing closed, no quick action run, nothing hidden), the body followed by the service's own footer
(`Refs <ticket>`, the job); a draft, always; then its `comment`, neutralized too. Afterwards the pull request's
address is the ticket's `link`, a timeline entry says so, and the ticket moves to `ci` waiting on `ci` where its
machine allows. A pull request found open on the branch is written on only when it is the service's own for the
ticket (`ownership`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from domain import units
from domain.board import Board
from domain.clock import Clock
from domain.config import Config
from domain.dispatch import neutralize
from domain.redaction import Redactor
from machines.stages import FINAL_STAGES
from storage import decisions, tickets
from storage import jobs as rows

GITHUB, GITLAB = "github", "gitlab"
_NUMBER = re.compile(r"/(?:pull|merge_requests)/([0-9]+)(?:[/#?].*)?$")


@dataclass(frozen=True)
class ForgePlan:
    """What to write for one job, and what of it was written already (an earlier attempt's)."""

    job_id: int
    ticket: str
    forge: str  # GITHUB or GITLAB
    repo: str
    branch: str
    title: str
    body: str
    draft: bool
    comment: str | None
    pull_request: str | None  # the address, once written
    number: int | None  # its number (GitHub) or iid (GitLab), once written
    commented: bool


@dataclass(frozen=True)
class NothingToWrite:
    """Why nothing is written for the job (no repository, no token, the job is not one that writes)."""

    reason: str


def forge_of(envelope: dict[str, Any]) -> str:
    """GitLab for an event that came from GitLab, else GitHub."""
    actor = envelope.get("actor") or {}
    said = [str(envelope.get("id") or ""), str(actor.get("id") or "")]
    return GITLAB if any(text.startswith("gitlab:") for text in said) else GITHUB


class ForgeWrites:
    def __init__(self, config: Config, clock: Clock, board: Board):
        self.config = config
        self.clock = clock
        self.board = board
        # A configured secret never leaves in a worker's text either (it could only have come from somewhere else).
        self.redact = Redactor.of(config)

    def plan(self, job_id: int) -> ForgePlan | NothingToWrite:
        """What to write for the job (read in one connection of the caller's)."""
        job = rows.get(job_id)
        if job is None:
            return NothingToWrite(f"no job {job_id}")
        output = job.result if isinstance(job.result, dict) else {}
        if job.state != rows.SUCCEEDED or output.get("status") != "changes_ready":
            return NothingToWrite(f"job {job_id} is {job.state} without changes ready: nothing is written")
        decision = decisions.get(job.decision_id)
        envelope = decision.envelope if decision is not None and isinstance(decision.envelope, dict) else {}
        repo = (envelope.get("subject") or {}).get("repo")
        if not repo:
            return NothingToWrite(
                "the event that dispatched the job names no repository (subject.repo): nothing written"
            )
        forge = forge_of(envelope)
        if forge == GITHUB and not self.config.github_api_token:
            return NothingToWrite(f"SVC_GITHUB_TOKEN is not set: nothing written to {repo}")
        if forge == GITLAB and not self.config.gitlab_api_token:
            return NothingToWrite(f"SVC_GITLAB_TOKEN is not set: nothing written to {repo}")
        asked = output.get("pull_request") or {}
        title = asked.get("title") or f"{job.ticket}: {output['summary'].splitlines()[0]}"
        body = asked.get("body") or output["summary"]
        # The worker's text neutralized (mentions, closing keywords, quick actions, hidden text), then the footer.
        limit = neutralize.TITLE_MAX_GITLAB if forge == GITLAB else neutralize.TITLE_MAX_GITHUB
        comment = output.get("comment")
        return ForgePlan(
            job_id=job.id,
            ticket=job.ticket,
            forge=forge,
            repo=repo,
            branch=output["branch"],
            title=neutralize.title(self.redact(title), limit=limit),
            body=neutralize.pull_request_body(
                self.redact(body), ticket=job.ticket, job_id=job.id, role=job.role, rule=job.rule
            ),
            draft=True,  # the output gate refuses any other (`output_gate`)
            comment=neutralize.comment(self.redact(comment)) if comment else None,
            pull_request=job.forge_pull_request,
            number=number_of(job.forge_pull_request or ""),
            commented=job.forge_comment is not None,
        )

    def pull_request_written(self, plan: ForgePlan, *, url: str, created: bool) -> None:
        """The pull request exists: on the job (at once, so no retry opens another), as the ticket's link, on its
        timeline, and the ticket to `ci` waiting on `ci` where its machine allows."""

        def work() -> None:
            if not rows.set_forge(plan.job_id, pull_request=url):
                return  # recorded already (an earlier attempt got this far)
            ticket = tickets.get(plan.ticket, for_update=True)
            if ticket is None or ticket.stage in FINAL_STAGES:
                return
            how = "opened" if created else "found open"
            self.board.step_ticket(
                ticket,
                to="ci",
                waiting_on="ci",
                kind="pull_request",
                event="pull_request",
                actor="jobs",
                at=self.clock(),
                summary=f"draft pull request {how} for job {plan.job_id}: {url}",
                data={"job_id": plan.job_id, "pull_request": url, "created": created, "forge": plan.forge},
                extra_changes={"link": url},
            )

        units.run(work, what=f"recording the pull request of job {plan.job_id}")

    def comment_written(self, plan: ForgePlan, *, url: str) -> None:
        units.run(lambda: rows.set_forge(plan.job_id, comment=url), what=f"recording the comment of job {plan.job_id}")

    def gave_up(self, job_id: int, reason: str) -> None:
        """Inside the outbox's transaction: why nothing (more) was written, on the job."""
        rows.set_forge(job_id, error=reason)


def number_of(url: str) -> int | None:
    found = _NUMBER.search(url)
    return int(found.group(1)) if found else None
