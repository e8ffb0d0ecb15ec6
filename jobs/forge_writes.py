"""The outbox handler of the forge writes (kind `forge_write`, queued by an accepted `changes_ready` result in its own
transaction, `domain/dispatch/jobs.py`): the draft pull request (GitLab: merge request), or for a fixer the ticket's
own, then the comment, with the service's token, through the one forge interface (`integrations/forges.py`): this
handler never asks which forge it holds.

Never two pull requests for one job: the address is recorded on the job as soon as the pull request exists
(`ForgeWrites.pull_request_known`), a later attempt skips it, and the forge finds a pull request already open for the
branch instead of opening another (a crash between the call and the record). A `TransportError` says what comes
next: transient (5xx, 429 with its `Retry-After`, no answer) is tried again by the outbox (5 s, then 15 s, ...),
permanent (another 4xx) is given up; once given up, the write is `failed` with the forge's own words (`record`). A
write with nothing to do now (held while paused, dropped, impossible without a token) is handled at once without a
call, and says so on the job.
"""

from __future__ import annotations

from collections.abc import Mapping

from domain.dispatch import ownership
from domain.dispatch.forge import ForgePlan, ForgeWrites, Stop
from integrations.forges import Forge
from integrations.transport import TransportError
from jobs.delivery import SENT, SKIP, Attempt, Outcome
from storage.db import connection

__all__ = ["ForgeWrite"]


class ForgeWrite:
    def __init__(self, writes: ForgeWrites, forges: Mapping[str, Forge]):
        self.writes = writes
        self.forges = forges
        # A forge's answer that echoes a configured secret is kept (the job's `forge.error`, the outbox) without it.
        self.redact = writes.redact

    def __call__(self, attempt: Attempt) -> Outcome:
        job_id = attempt.payload["job_id"]
        plan = self.writes.begin(job_id, forges=self.forges)
        if isinstance(plan, Stop):
            return Outcome.skipped(plan.reason)
        try:
            written = self._write(self.forges[plan.forge], plan)
        except TransportError as exc:
            exc.detail = self.redact(exc.detail)
            return Outcome.failed(exc)
        self.writes.written(job_id)
        return Outcome.sent(self.redact(f"job {job_id}: {written}"), job_id=job_id)

    def _write(self, forge: Forge, plan: ForgePlan) -> str:
        url, number = plan.pull_request, plan.number
        if url is None or number is None:
            made = forge.open_draft(plan.repo, branch=plan.branch, title=plan.title, body=plan.body)
            if not made.created:
                # One found open on the branch is written on only when the service opened it for this ticket.
                with connection():
                    foreign = ownership.foreign(ticket=plan.ticket, url=made.url, body=made.body)
                if foreign is not None:
                    raise TransportError(foreign, permanent=True)
            self.writes.pull_request_known(plan, made)
            url, number = made.url, made.number
        else:
            self.writes.pull_request_known(plan, None)  # a fixer's changes, on the ticket's pull request
        if plan.comment and not plan.commented:
            self.writes.comment_written(plan, url=self.redact(forge.comment(plan.repo, number, plan.comment)))
        return f"pull request {url}" + (" and its comment" if plan.comment else "")

    def record(self, attempt: Attempt, outcome: Outcome) -> None:
        """Refused or given up (in the outcome's transaction): the write failed, in the forge's own words."""
        if outcome.status not in (SENT, SKIP):
            self.writes.failed(attempt.payload["job_id"], outcome.detail)
