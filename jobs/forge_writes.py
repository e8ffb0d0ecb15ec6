"""The outbox handler of the forge writes (kind `forge_write`, queued by an accepted `changes_ready` result in its own
transaction, `domain/dispatch/jobs.py`): the draft pull request (GitLab: merge request), then the comment, with
the service's token.

Never two pull requests for one job: the address is recorded on the job as soon as the pull request exists
(`ForgeWrites.pull_request_written`), a later attempt skips it, and the forge client finds a pull request already
open for the branch instead of opening another (a crash between the call and the record). A `TransportError` says
what comes next: transient (5xx, 429 with its `Retry-After`, no answer) is tried again by the outbox (5 s, then
15 s, ...), permanent (another 4xx) is given up; either way, once given up, `forge.error` on the job says why. A
job with nothing to write (no repository, no token) is handled at once without a call, and says so the same way.
"""

from __future__ import annotations

from domain.clock import Clock
from domain.config import Config
from domain.dispatch import ownership
from domain.dispatch.forge import GITHUB, ForgePlan, ForgeWrites, NothingToWrite
from domain.redaction import Redactor
from integrations.github import GitHub
from integrations.gitlab import GitLab
from integrations.transport import TransportError
from jobs.delivery import SENT, Attempt, Outcome
from storage.db import connection

__all__ = ["ForgeWrite"]


class ForgeWrite:
    def __init__(self, config: Config, clock: Clock, writes: ForgeWrites):
        self.config = config
        self.clock = clock
        self.writes = writes
        # A forge's answer that echoes a configured secret is kept (the job's `forge.error`, the outbox) without it.
        self.redact = Redactor.of(config)

    def __call__(self, attempt: Attempt) -> Outcome:
        job_id = attempt.payload["job_id"]
        with connection():
            plan = self.writes.plan(job_id)
        if isinstance(plan, NothingToWrite):
            return Outcome.skipped(plan.reason)
        try:
            written = self._write(plan)
        except TransportError as exc:
            exc.detail = self.redact(exc.detail)
            return Outcome.failed(exc)
        return Outcome.sent(self.redact(f"job {job_id}: {written}"), job_id=job_id)

    def _write(self, plan: ForgePlan) -> str:
        if plan.forge == GITHUB:
            client = GitHub(self.config.github_api_url, self.config.github_api_token or "", tries=1)
        else:
            client = GitLab(self.config.gitlab_api_url, self.config.gitlab_api_token or "", tries=1)
        try:
            url, number = plan.pull_request, plan.number
            if url is None or number is None:
                if plan.forge == GITHUB:
                    made = client.draft_pull_request(
                        plan.repo, branch=plan.branch, title=plan.title, body=plan.body, draft=plan.draft
                    )
                    url, number, created, said = made.html_url, made.number, made.created, made.body
                else:
                    made = client.draft_merge_request(
                        plan.repo, branch=plan.branch, title=plan.title, body=plan.body, draft=plan.draft
                    )
                    url, number, created, said = made.web_url, made.iid, made.created, made.description
                with connection():
                    # One found open on the branch is written on only when the service opened it for this ticket.
                    foreign = None if created else ownership.foreign(ticket=plan.ticket, url=url, body=said)
                    if foreign is not None:
                        raise TransportError(foreign, permanent=True)
                    self.writes.pull_request_written(plan, url=self.redact(url), created=created)
            if plan.comment and not plan.commented:
                if plan.forge == GITHUB:
                    said = client.comment(plan.repo, number, plan.comment)
                else:
                    said = client.note(plan.repo, number, plan.comment)
                with connection():
                    self.writes.comment_written(plan, url=self.redact(said))
        finally:
            client.session.close()
        return f"pull request {url}" + (" and its comment" if plan.comment else "")

    def record(self, attempt: Attempt, outcome: Outcome) -> None:
        """Given up or skipped (in the outcome's transaction): why, as the job's `forge.error`."""
        if outcome.status != SENT:
            self.writes.gave_up(attempt.payload["job_id"], outcome.detail)
