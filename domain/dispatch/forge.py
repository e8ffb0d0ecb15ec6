"""The forge write of a job whose output passed the gate with `changes_ready`: what is to be written, and what became
of it (its `forge.state`, `machines/forge_write.py`). The jobs process makes the calls (`jobs/forge_writes.py`,
through the one forge interface of `integrations/forges.py`, with the service's own token: a worker never holds one);
each step's outcome is recorded here in its own unit of work, the pull request's address as soon as it exists, so a
retry never opens a second one.

Where: the ticket's pull request when it has one open (a fixer's changes: a comment on it, never a second pull
request), else the dispatching envelope's `subject.repo`, on GitLab when the event came from GitLab (its id or its
actor's says `gitlab:`), else on GitHub. What: the output's pull request title and body
neutralized (`neutralize`: nobody pinged, nothing closed, no quick action run, nothing hidden), the body followed by
the service's own footer (`Refs <ticket>`, the job), a draft; then its `comment`, neutralized too. Afterwards the pull
request's address is the ticket's `link`, a timeline entry says so, and the ticket moves to `ci` waiting on `ci` where
its machine allows.

A write that fails (refused, or given up) leaves the job `succeeded` (its output was accepted), `forge.state:
failed` with the forge's own words, and the ticket in `execute` waiting on `forge_failed` (needs you) with a chat
post, until an operator retries it. One whose job or ticket was cancelled or finished before it went out is
`dropped`; while dispatch is paused it waits, `held`, and goes out on resume.

The service's own account on each forge (`OwnForgeUsers`, `GET /user` read once) tells its own forge events from the
team's (`domain/router/evaluation.py`'s `own`).

A pull request found open on the branch is written on only when it is the service's own for the ticket
(`ownership`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from contracts.envelope import CHANGES_READY
from domain import chat, units
from domain.board import Board
from domain.clock import Clock
from domain.config import Config
from domain.dispatch import neutralize
from domain.dispatch.jobs import CHAT_SOURCE, FORGE, FORGE_WRITE_KIND, paused
from domain.errors import Conflict, NotFound
from domain.redaction import Redactor
from integrations.forges import GITHUB, GITLAB, ChangeRequest, Forge, adapters
from integrations.transport import TransportError
from machines import forge_write
from machines import job as job_machine
from machines.stages import FINAL_STAGES
from storage import decisions, outbox, pull_requests, tickets
from storage import jobs as rows
from storage.jobs import Job
from storage.models import JSON

log = logging.getLogger("svc.dispatch")

# How long a forge that would not say who the service is there is left alone before it is asked again.
OWN_LOGIN_RETRY_SECONDS = 300.0


@dataclass(frozen=True)
class ForgePlan:
    """What to write for one job, and what of it was written already (an earlier attempt's)."""

    job_id: int
    ticket: str
    role: str
    forge: str  # GITHUB or GITLAB
    repo: str
    branch: str
    title: str
    body: str
    comment: str | None
    head_sha: str | None  # the last commit of the output: the pull request's latest head once it is written
    pull_request: str | None  # its address, once written (or the ticket's open one, for a fixer)
    number: int | None  # its number (GitHub) or iid (GitLab), once known
    commented: bool


@dataclass(frozen=True)
class Stop:
    """Why nothing (more) is written for the job now; already recorded on it where it says so."""

    reason: str


def forge_of(envelope: Mapping[str, JSON]) -> str:
    """GitLab for an event that came from GitLab, else GitHub."""
    actor = envelope.get("actor")
    actor_id = actor.get("id") if isinstance(actor, dict) else None
    said = [str(envelope.get("id") or ""), str(actor_id or "")]
    return GITLAB if any(text.startswith("gitlab:") for text in said) else GITHUB


def forge_adapters(config: Config) -> dict[str, Forge]:
    """The forges the service may write to (those with a token), one adapter each: built once by each process."""
    return adapters(
        github_api_url=config.github_api_url,
        github_token=config.github_api_token,
        gitlab_api_url=config.gitlab_api_url,
        gitlab_token=config.gitlab_api_token,
    )


class ForgeWrites:
    def __init__(self, config: Config, clock: Clock, board: Board):
        self.config = config
        self.clock = clock
        self.board = board
        # A configured secret never leaves in a worker's text either (it could only have come from somewhere else).
        self.redact = Redactor.of(config)

    def begin(self, job_id: int, *, forges: Mapping[str, Forge]) -> ForgePlan | Stop:
        """What to write for the job now, in one unit of work: nothing when it is not (or no longer) a pending write,
        when dispatch is paused (then it is held), when its job or ticket was cancelled or finished (dropped), or when
        it cannot be written (no repository, no token: failed, saying why)."""

        def work() -> ForgePlan | Stop:
            job = rows.get(job_id, for_update=True)
            if job is None:
                return Stop(f"no job {job_id}")
            output = rows.result_of(job)
            if job.state != job_machine.SUCCEEDED or output.get("status") != CHANGES_READY:
                return Stop(f"job {job_id} is {job.state} without changes ready: nothing is written")
            if job.forge_state != forge_write.PENDING:
                return Stop(f"the forge write of job {job_id} is {job.forge_state}")
            ticket = tickets.get(job.ticket, for_update=True)
            if ticket is None or ticket.stage in FINAL_STAGES:
                said = f"{job.ticket} is {ticket.stage}" if ticket is not None else f"{job.ticket} is gone"
                return self._drop(job, f"{said}: nothing written")
            if paused():
                self._set(job, "hold", {})
                return Stop(f"dispatch is paused: the forge write of job {job_id} is held until it resumes")
            return self._plan(job, output, forges)

        return units.run(work, what=f"the forge write of job {job_id}")

    def _plan(self, job: Job, output: Mapping[str, JSON], forges: Mapping[str, Forge]) -> ForgePlan | Stop:
        mine = pull_requests.of_ticket(job.ticket)
        existing = mine if mine is not None and mine.state == pull_requests.OPEN and mine.url else None
        decision = decisions.get(job.decision_id)
        envelope = decision.envelope if decision is not None and isinstance(decision.envelope, dict) else {}
        subject = envelope.get("subject") if isinstance(envelope.get("subject"), dict) else {}
        repo = existing.repo if existing is not None and existing.repo else subject.get("repo")
        forge = existing.forge if existing is not None else forge_of(envelope)
        if not repo:
            return self._refused(job, "the event that dispatched the job names no repository (subject.repo)")
        if forge not in forges:
            variable = "SVC_GITLAB_TOKEN" if forge == GITLAB else "SVC_GITHUB_TOKEN"
            return self._refused(job, f"{variable} is not set: nothing can be written to {repo}")
        asked = output.get("pull_request") if isinstance(output.get("pull_request"), dict) else {}
        summary = str(output.get("summary") or "")
        title = str(asked.get("title") or f"{job.ticket}: {summary.splitlines()[0] if summary else job.role}")
        body = str(asked.get("body") or summary)
        # The worker's text neutralized (mentions, closing keywords, quick actions, hidden text), then the footer.
        limit = neutralize.TITLE_MAX_GITLAB if forge == GITLAB else neutralize.TITLE_MAX_GITHUB
        commits = output.get("commits") if isinstance(output.get("commits"), list) else []
        last = commits[-1] if commits and isinstance(commits[-1], dict) else {}
        comment = output.get("comment")
        url = job.forge_pull_request or (existing.url if existing is not None else None)
        number = existing.number if existing is not None and url == existing.url else _number_of(url)
        return ForgePlan(
            job_id=job.id,
            ticket=job.ticket,
            role=job.role,
            forge=forge,
            repo=str(repo),
            branch=str(output["branch"]),
            title=neutralize.title(self.redact(title), limit=limit),
            body=neutralize.pull_request_body(
                self.redact(body), ticket=job.ticket, job_id=job.id, role=job.role, rule=job.rule
            ),
            comment=neutralize.comment(self.redact(comment)) if isinstance(comment, str) and comment else None,
            head_sha=last.get("sha") if isinstance(last.get("sha"), str) else None,
            pull_request=url,
            number=number,
            commented=job.forge_comment is not None,
        )

    def pull_request_known(self, plan: ForgePlan, made: ChangeRequest | None) -> None:
        """The job's changes are on a pull request: one opened (or found open) for it now (`made`), or, for a fixer,
        the ticket's own (`made` None). On the job (at once, so no retry opens another), as the ticket's pull
        request and `link`, on its timeline, and the ticket to `ci` waiting on `ci` where its machine allows."""
        url = made.url if made is not None else plan.pull_request
        number = made.number if made is not None else plan.number
        assert url is not None

        def work() -> None:
            if not rows.record_pull_request(plan.job_id, url):
                return  # recorded already (an earlier attempt got this far)
            now = self.clock()
            ticket = tickets.get(plan.ticket, for_update=True)
            if ticket is None or ticket.stage in FINAL_STAGES:
                return
            mine = pull_requests.of_ticket(plan.ticket, for_update=True)
            if mine is not None and mine.url == url:
                changes: dict[str, object] = {"state": pull_requests.OPEN}
                if plan.head_sha:
                    changes["head_sha"] = plan.head_sha
                pull_requests.change(plan.ticket, changes, at=now)
            else:
                pull_requests.put(
                    plan.ticket,
                    forge=plan.forge,
                    repo=plan.repo,
                    number=number,
                    url=url,
                    branch=plan.branch,
                    head_sha=plan.head_sha,
                    job_id=plan.job_id,
                    at=now,
                )
            if made is None:
                said = f"job {plan.job_id} ({plan.role}) pushed its changes to the pull request {url}"
            else:
                said = f"draft pull request {'opened' if made.created else 'found open'} for job {plan.job_id}: {url}"
            self.board.step_ticket(
                ticket,
                move="submit_to_ci",
                waiting_on="ci",
                kind="pull_request",
                event="pull_request",
                actor="jobs",
                at=now,
                summary=said,
                data={
                    "job_id": plan.job_id,
                    "pull_request": url,
                    "created": bool(made is not None and made.created),
                    "forge": plan.forge,
                },
                extra_changes={"link": url} if made is not None or not ticket.link else None,
            )

        units.run(work, what=f"recording the pull request of job {plan.job_id}")

    def comment_written(self, plan: ForgePlan, *, url: str) -> None:
        def work() -> None:
            job = rows.get(plan.job_id, for_update=True)
            if job is not None:
                rows.set_forge(job.id, expected_state=job.forge_state, changes={"forge_comment": url})

        units.run(work, what=f"recording the comment of job {plan.job_id}")

    def written(self, job_id: int) -> None:
        """Everything was written: the write is done."""

        def work() -> None:
            job = rows.get(job_id, for_update=True)
            if job is not None and forge_write.allows(job.forge_state, "write"):
                self._set(job, "write", {"forge_error": None})

        units.run(work, what=f"the forge write of job {job_id}")

    def failed(self, job_id: int, detail: str) -> None:
        """Inside the outbox's transaction: the forge refused the write, or it was given up: loudly."""
        job = rows.get(job_id, for_update=True)
        if job is None or not forge_write.allows(job.forge_state, "fail"):
            return
        self._fail(job, detail)

    def retry(self, job_id: int, *, actor: str) -> Job:
        """An operator's retry of a failed write: queued again (`Conflict` unless it failed)."""

        def work() -> Job:
            job = rows.get(job_id, for_update=True)
            if job is None:
                raise NotFound("job", str(job_id))
            if job.forge_state != forge_write.FAILED:
                raise Conflict(f"the forge write of job {job_id} is {job.forge_state}; only a failed one is retried")
            now = self.clock()
            self._set(job, "retry", {"failure_kind": None, "failure_detail": None})
            outbox.enqueue(FORGE_WRITE_KIND, {"job_id": job.id}, at=now)
            ticket = tickets.get(job.ticket, for_update=True)
            if ticket is not None and ticket.stage not in FINAL_STAGES:
                self.board.step_ticket(
                    ticket,
                    move=None,
                    waiting_on=None if ticket.waiting_on == "forge_failed" else ticket.waiting_on,
                    kind="forge_retried",
                    event="forge_retried",
                    actor=actor,
                    at=now,
                    summary=f"the forge write of job {job.id} queued again by {actor}",
                    data={"job_id": job.id, "actor": actor},
                )
            retried = rows.get(job.id)
            assert retried is not None
            return retried

        return units.run(work, what=f"retrying the forge write of job {job_id}")

    # -- inside a unit of work ------------------------------------------------------------------------------------

    def _set(self, job: Job, event: str, changes: dict[str, object]) -> str:
        state = forge_write.fire(job.forge_state, event)
        if not rows.set_forge(job.id, expected_state=job.forge_state, changes={**changes, "forge_state": state}):
            raise units.StaleRead(f"job {job.id}")
        return state

    def _drop(self, job: Job, why: str) -> Stop:
        self._set(job, "drop", {"forge_error": why})
        return Stop(why)

    def _refused(self, job: Job, why: str) -> Stop:
        self._fail(job, why)
        return Stop(why)

    def _fail(self, job: Job, detail: str) -> None:
        now = self.clock()
        self._set(job, "fail", {"forge_error": detail, "failure_kind": FORGE, "failure_detail": detail})
        ticket = tickets.get(job.ticket, for_update=True)
        if ticket is not None and ticket.stage not in FINAL_STAGES:
            self.board.step_ticket(
                ticket,
                move="start",
                waiting_on="forge_failed",
                kind="forge_failed",
                event="forge_failed",
                actor="jobs",
                at=now,
                summary=f"nothing more was written to the forge for job {job.id}: {detail}",
                data={"job_id": job.id, "error": detail},
            )
        chat.queue(f"{job.ticket}: the forge write of job {job.id} failed: {detail}", source=CHAT_SOURCE, at=now)


def _number_of(url: str | None) -> int | None:
    """The number at the end of a pull (merge) request's address: `.../pull/12`, `.../merge_requests/12`."""
    if not url:
        return None
    tail = url.rstrip("/").rsplit("/", 1)[-1].split("#", 1)[0]
    return int(tail) if tail.isascii() and tail.isdigit() else None


class OwnForgeUsers:
    """The service's own account on each forge it has a token for, as an envelope's actor id names it
    (`github:<login>`, `gitlab:<username>`): read from the forge once (`GET /user`), before the event's unit of work
    (never inside a transaction), and again after `OWN_LOGIN_RETRY_SECONDS` when the forge would not say."""

    def __init__(self, forges: Mapping[str, Forge], *, monotonic: Callable[[], float] = time.monotonic):
        self.forges = dict(forges)
        self.monotonic = monotonic
        self._ids: dict[str, str] = {}
        self._failed_at: dict[str, float] = {}
        # The forges being asked now, each with what its askers wait on: the call (bounded by the client's timeouts,
        # retries and their pauses included) is made outside the lock, by the first thread to need it.
        self._asking: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def learn(self, forge: str) -> None:
        """Ask `forge` who the service is there, unless it said so already (or would not, a moment ago); a thread that
        finds another asking waits for that answer instead of asking too."""
        adapter = self.forges.get(forge)
        if adapter is None or forge in self._ids:
            return
        with self._lock:
            failed = self._failed_at.get(forge)
            if forge in self._ids or (failed is not None and self.monotonic() - failed < OWN_LOGIN_RETRY_SECONDS):
                return
            answered = self._asking.get(forge)
            ours = answered is None
            if answered is None:
                answered = self._asking[forge] = threading.Event()
        if not ours:
            answered.wait()
            return
        try:
            login = adapter.own_login()
        except TransportError as exc:
            with self._lock:
                self._failed_at[forge] = self.monotonic()
            log.warning("forge user", extra={"forge": forge, "detail": exc.detail})
        else:
            with self._lock:
                self._ids[forge] = f"{forge}:{login}"
        finally:
            with self._lock:
                del self._asking[forge]
            answered.set()

    def ids(self) -> frozenset[str]:
        """The actor ids of the service's own forge accounts known so far."""
        return frozenset(self._ids.values())
