"""Dispatch jobs (rows in `storage/jobs.py`): a live rule's passing decision queues one; a worker in a bay claims it,
heartbeats, and hands back its output, which passes the output gate before anything is written to the forge.

| state       | how it gets there                                                                                      |
|-------------|--------------------------------------------------------------------------------------------------------|
| `queued`    | a live rule's decision passed every gate and dispatch is not paused (`queue`, in the decision's unit) |
|             | or its lease ran out (`reap`, attempts + 1)                                                            |
| `running`   | a worker claimed it (`claim`): the oldest queued job, within the policy's fleet size                   |
| `succeeded` | its output passed the gate, `no_changes` or `changes_ready` (then the forge write is queued)           |
| `failed`    | its output was refused by the gate or said `failed`; or its lease ran out a retry budget + 1 times     |
| `cancelled` | an operator cancelled it; its ticket was finished or blocked (the heartbeat says so); a queued job     |
|             | whose ticket finished is cancelled when a claim comes to it                                            |

The bay (a slot) at the end of a job: a claim holds the worker's bay for the job's ticket, as `POST slots/{name}/claim`
does. The seed drops slot claims when a ticket is done or cancelled (the slot steward wipes the bay then), so a job
that ends with changes (succeeded, the ticket going on to CI), that failed (a person looks at what is in the bay) or
that was cancelled leaves the bay held by its ticket until the ticket is finished. A job that ends with no changes
frees the bay (nothing in it is worth keeping), and so does a lease that ran out: the job may run again in another
bay, and the idle reclaim wipes what was left.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from contracts import Violation
from contracts.envelope import worker_output_violations
from domain import chat, units
from domain.board import Board
from domain.clock import Clock
from domain.config import Config
from domain.dispatch import output_gate, switch, workers
from domain.errors import Conflict, Forbidden, NotFound
from machines.stages import FINAL_STAGES, HUMAN_GATE_STAGES
from storage import decisions, outbox, policy_versions, tickets, timeline
from storage import jobs as rows
from storage.jobs import CANCELLED, FAILED, QUEUED, RUNNING, STATES, SUCCEEDED

__all__ = ["CANCELLED", "FAILED", "QUEUED", "RUNNING", "STATES", "SUCCEEDED", "Dispatch", "JobNotHeld", "NotYours"]

# The outbox kind of the forge writes of a job whose output was accepted with changes (`jobs/forge_writes.py`).
FORGE_WRITE_KIND = "forge_write"
# A ticket in one of these stages tells its worker to stop.
STOP_STAGES = frozenset({"done", "cancelled", "blocked"})
REAP_BATCH = 50
CHAT_SOURCE = "dispatch"
SHOWN = 300  # characters of an output that is not even an object, kept as the job's result


# The output gate's violations kept in a refused job's reason (its page and `GET dispatch/jobs/{id}` show them): every
# one, up to this many (the 422 itself names them all).
REASONS_KEPT = 20


class JobNotHeld(Conflict):
    """A heartbeat or result for a job this worker does not hold (never its claim, another worker's, a lease that
    ran out and was put back), or a result for a job no longer running."""


class NotYours(Forbidden):
    """A worker asked for a job or ticket other than the ones it holds or held."""


@dataclass(frozen=True)
class Claimed:
    """What a claim hands the worker: the job, the envelope of the decision that queued it, its ticket."""

    job: Any
    envelope: Any
    ticket: Any
    lease_seconds: int


@dataclass(frozen=True)
class Beat:
    leased_until: datetime | None
    cancel: bool
    reason: str | None


@dataclass(frozen=True)
class Finished:
    """A result taken: the job as it now is, and the output gate's violations (refused when there are any)."""

    job: Any
    violations: list[Violation]

    @property
    def refused(self) -> bool:
        return bool(self.violations)


@dataclass(frozen=True)
class Knobs:
    fleet_size: int
    retry_budget: int


def queue(*, decision_id: int, event_id: str | None, ticket: str, role: str, rule: str | None, at: datetime) -> int:
    """Inside the unit of work that recorded the decision: queue its job and mark the decision dispatched; the job's
    id. The caller has checked the switch (`switch.read()`): only a live rule's passing decision comes here."""
    job = rows.insert(decision_id=decision_id, event_id=event_id, ticket=ticket, role=role, rule=rule, at=at)
    rows.mark_dispatched(decision_id, job.id)
    return job.id


def paused() -> bool:
    """Whether the switch holds dispatch (inside a unit of work)."""
    return switch.read().paused


class Dispatch:
    """The units of work over jobs: claim, heartbeat, result, cancel, the lease reaper, and reading them."""

    def __init__(self, config: Config, clock: Clock, board: Board):
        self.config = config
        self.clock = clock
        self.board = board
        self.lease = timedelta(seconds=config.worker_lease_seconds)

    # -- reading -------------------------------------------------------------------------------------------------

    def job(self, job_id: int) -> Any:
        found = rows.get(job_id)
        if found is None:
            raise NotFound("job", str(job_id))
        return found

    def jobs(
        self, *, limit: int, cursor: str | None, state: str | None, ticket: str | None
    ) -> tuple[list[Any], str | None]:
        return rows.page(limit=limit, cursor=cursor, state=state, ticket=ticket)

    def counts_by_rule(self) -> dict[str | None, dict[str, int]]:
        """How many jobs each rule dispatched, by state (the scorecard's "jobs by state" of a live rule)."""
        return rows.counts_by_rule()

    def check_worker_reads_job(self, worker: str, job_id: int) -> None:
        """A worker may read a job it holds or held (`NotYours` otherwise; `NotFound` for no job at all)."""
        job = self.job(job_id)
        workers.check_predecessor(job, worker)
        if job.worker != worker:
            raise NotYours(f"{worker} is a worker: it may read only the jobs it claimed, and job {job_id} is not one")

    def check_worker_reads_ticket(self, worker: str, key: str) -> None:
        """A worker may read the ticket of a job it holds or held."""
        me = workers.worker(worker)
        if me is None or not rows.held_by(worker, ticket=key, principal=me.principal):
            raise NotYours(f"{worker} is a worker: it may read only the tickets of the jobs it claimed, not {key}")

    # -- a worker's calls ----------------------------------------------------------------------------------------

    def claim(self, bay: str, *, worker: str) -> Claimed | None:
        """The oldest queued job, now running in `bay` under a lease for `worker`; None when dispatch is paused, the
        policy's fleet size of jobs already run, or nothing is queued. The bay is held for the job's ticket (a bay
        held by another ticket: `Conflict`), and the ticket moves to `execute` waiting on `agent` where its machine
        allows it, with one timeline entry.

        A queued job whose ticket was finished, blocked or taken to a human gate since its decision is cancelled on
        the way (saying why); one whose ticket holds another bay is left to that bay's worker."""

        def work() -> Claimed | None:
            rows.serialise_claims()  # before anything is counted: claims take turns from here
            me = workers.admit_claim(worker, bay, now=self.clock())  # its own bay, one job at a time: before a 204
            if paused():
                return None
            knobs = self.knobs()
            if rows.count_running() >= knobs.fleet_size:
                return None
            after = 0
            while True:
                job = rows.oldest_queued(after=after)
                if job is None:
                    return None
                after = job.id
                now = self.clock()
                ticket = tickets.get(job.ticket, for_update=True)
                gone = f"{job.ticket} is {ticket.stage if ticket else 'not on the board'}"
                if ticket is None or ticket.stage in STOP_STAGES:
                    self._cancel(job, reason=f"{gone}: nothing to do", now=now, actor=worker, ticket=ticket)
                    continue
                if ticket.stage in HUMAN_GATE_STAGES:
                    self._cancel(job, reason=f"{gone}: a person has it now", now=now, actor=worker, ticket=ticket)
                    continue
                if ticket.assigned_slot and ticket.assigned_slot != bay:
                    continue  # its ticket works in another bay: that bay's worker takes it
                return self._start(job, ticket, bay, worker=worker, principal=me.principal, now=now)

        return self._for_worker(worker, work, what="claiming a job")

    def _for_worker(self, worker: str, work: Any, *, what: str) -> Any:
        """`units.run(work)` for a worker's call; a refusal of it is kept for the board (`workers.refused`)."""
        try:
            return units.run(work, what=what)
        except (Forbidden, Conflict) as refusal:
            workers.refused(worker, str(refusal), at=self.clock())
            raise

    def _start(self, job: Any, ticket: Any, bay: str, *, worker: str, principal: str, now: datetime) -> Claimed:
        self.board.hold_slot(bay, ticket, actor=worker, at=now, record=False, job_id=job.id)
        until = now + self.lease
        if not rows.swap(
            job.id,
            expected_state=QUEUED,
            changes={
                "state": RUNNING,
                "bay": bay,
                "worker": worker,
                "worker_principal": principal,
                "claimed_at": now,
                "heartbeat_at": now,
                "leased_until": until,
            },
        ):
            raise units.StaleRead(f"job {job.id}")
        self.board.step_ticket(
            ticket,
            to="execute",
            waiting_on="agent",
            kind="job_claimed",
            event="claim",
            actor=worker,
            at=now,
            summary=f"claimed by {worker} in {bay} (job {job.id}, {job.role})",
            data={"job_id": job.id, "bay": bay, "worker": worker, "role": job.role, "attempt": job.attempts + 1},
        )
        decision = decisions.get(job.decision_id)
        return Claimed(
            rows.get(job.id), decision.envelope if decision else None, ticket, int(self.lease.total_seconds())
        )

    def heartbeat(self, job_id: int, *, worker: str) -> Beat:
        """Renew the lease of a job `worker` holds; `cancel` when the job was cancelled, or its ticket is done,
        cancelled or blocked (the job is then cancelled here, so the fleet has room again)."""

        def work() -> Beat:
            job = rows.get(job_id, for_update=True)
            now = self.clock()
            self._held(job, job_id, worker, now, cancelled_ok=True)
            workers.heard(worker, now=now)
            if job.state == CANCELLED:
                return Beat(job.leased_until, True, job.cancel_reason)
            ticket = tickets.get(job.ticket, for_update=True)
            if ticket is None or ticket.stage in STOP_STAGES:
                why = f"{job.ticket} is {ticket.stage if ticket else 'gone'}"
                self._cancel(job, reason=why, now=now, actor=worker, ticket=ticket)
                return Beat(job.leased_until, True, why)
            until = now + self.lease
            changes = {"leased_until": until, "heartbeat_at": now}
            if not rows.swap(job_id, expected_state=RUNNING, changes=changes, worker=worker):
                raise units.StaleRead(f"job {job_id}")
            if job.bay:
                self.board.touch_slot(job.bay, at=now)
            return Beat(until, False, None)

        return self._for_worker(worker, work, what=f"the heartbeat of job {job_id}")

    def result(self, job_id: int, output: Any, *, worker: str) -> Finished:
        """The output gate, then the job's end: refused (violations) or `failed`, the job fails and its ticket waits
        on `agent_failed` with a chat post; `no_changes`, it succeeds and frees its bay; `changes_ready`, it succeeds
        and the forge writes are queued, in the same transaction. Nothing reaches the forge from here."""

        def work() -> Finished:
            job = rows.get(job_id, for_update=True)
            now = self.clock()
            self._held(job, job_id, worker, now, cancelled_ok=False)
            workers.heard(worker, now=now)
            violations = self.gate(job, output)
            ticket = tickets.get(job.ticket, for_update=True)
            kept = output if isinstance(output, dict) else {"not_an_object": repr(output)[:SHOWN]}
            status = output.get("status") if isinstance(output, dict) else None
            if violations or status == "failed":
                why = (
                    f"the output gate refused its output ({len(violations)} violation(s): "
                    + "; ".join(f"{v.path or '/'}: {v.message}" for v in violations[:REASONS_KEPT])
                    + (f"; and {len(violations) - REASONS_KEPT} more" if len(violations) > REASONS_KEPT else "")
                    + ")"
                    if violations
                    else f"the worker said it failed: {output.get('summary', '')}"
                )
                self._finish(job, FAILED, kept, now, reason=why)
                self._failed_ticket(job, ticket, why, now=now, actor=worker)
            elif status == "no_changes":
                self._finish(job, SUCCEEDED, kept, now)
                self._ticket_step(
                    ticket,
                    waiting_on=None,
                    kind="job_succeeded",
                    actor=worker,
                    now=now,
                    summary=f"job {job.id} ({job.role}) found nothing to change: {output['summary']}",
                    data={"job_id": job.id, "status": status},
                    free_bay=job.bay,
                )
            else:
                self._finish(job, SUCCEEDED, kept, now)
                outbox.enqueue(FORGE_WRITE_KIND, {"job_id": job.id}, at=now)
                self._ticket_step(
                    ticket,
                    waiting_on=None,
                    kind="job_succeeded",
                    actor=worker,
                    now=now,
                    summary=f"job {job.id} ({job.role}) has changes ready on {output['branch']}; "
                    "the draft pull request is queued",
                    data={"job_id": job.id, "status": status, "branch": output["branch"]},
                )
            return Finished(rows.get(job.id), violations)

        return self._for_worker(worker, work, what=f"the result of job {job_id}")

    def gate(self, job: Any, output: Any) -> list[Violation]:
        """The output gate: `svc.worker-output/v0`, the job's ticket and role, and the worker boundary's rules (the
        branch bound to the ticket, a draft only: `output_gate`); one violation per way the output breaks them."""
        found = list(worker_output_violations(output))
        if not isinstance(output, dict):
            return found
        if isinstance(output.get("ticket"), str) and output["ticket"] != job.ticket:
            found.append(Violation("/ticket", f"the job is for {job.ticket}, not {output['ticket']}"))
        if isinstance(output.get("role"), str) and output["role"] != job.role:
            found.append(Violation("/role", f"the job is a {job.role} job, not {output['role']}"))
        # The branch bound to the ticket, a valid git branch name; a draft only (`output_gate`).
        found.extend(output_gate.violations(output, ticket=job.ticket, prefix=self.config.worker_branch_prefix))
        return found

    # -- people's calls and the reaper ----------------------------------------------------------------------------

    def cancel(self, job_id: int, *, actor: str, reason: str | None = None) -> Any:
        """Cancel a queued or running job (its worker's next heartbeat says so); `Conflict` for a finished one."""

        def work() -> Any:
            job = rows.get(job_id, for_update=True)
            if job is None:
                raise NotFound("job", str(job_id))
            if job.state not in (QUEUED, RUNNING):
                raise Conflict(f"job {job_id} is {job.state}; only a queued or running job can be cancelled")
            self._cancel(job, reason=reason or f"cancelled by {actor}", now=self.clock(), actor=actor, ticket=None)
            return rows.get(job_id)

        return units.run(work, what=f"cancelling job {job_id}")

    def reap(self, *, limit: int = REAP_BATCH) -> int:
        """Put back every running job whose lease ran out (attempts + 1, its bay freed), or fail it once its attempts
        reach the policy's retry budget + 1 (its ticket then waits on `agent_failed`, with a chat post). Returns how
        many it handled; one unit of work."""

        def work() -> int:
            now = self.clock()
            expired = rows.lease_ran_out(now, limit=limit)
            if not expired:
                return 0
            budget = self.knobs().retry_budget
            for job in expired:
                self._expired(job, now=now, budget=budget)
            return len(expired)

        return units.run(work, what="putting back jobs whose lease ran out")

    def _expired(self, job: Any, *, now: datetime, budget: int) -> None:
        attempts = job.attempts + 1
        ticket = tickets.get(job.ticket, for_update=True)
        lapsed = f"the lease of job {job.id} ({job.worker} in {job.bay}) ran out"
        if attempts >= budget + 1:
            why = f"{lapsed} {attempts} time(s), the retry budget ({budget}) + 1"
            if not rows.swap(
                job.id,
                expected_state=RUNNING,
                changes={"state": FAILED, "attempts": attempts, "finished_at": now, "cancel_reason": why},
            ):
                return
            self._failed_ticket(job, ticket, why, now=now, actor="jobs", free_bay=job.bay)
            return
        if not rows.swap(
            job.id,
            expected_state=RUNNING,
            changes={"state": QUEUED, "attempts": attempts, "leased_until": None, "bay": None},
        ):
            return
        if ticket is not None and ticket.stage not in FINAL_STAGES:
            self._ticket_step(
                ticket,
                waiting_on=ticket.waiting_on,
                kind="job_requeued",
                actor="jobs",
                now=now,
                summary=f"{lapsed}; queued again (attempt {attempts + 1})",
                data={"job_id": job.id, "attempts": attempts, "bay": job.bay, "worker": job.worker},
                free_bay=job.bay,
            )

    def knobs(self) -> Knobs:
        """The policy's fleet size and retry budget in force (the first policy's before one is stored)."""
        stored = policy_versions.newest()
        document = stored.document if stored is not None else {}
        return Knobs(
            fleet_size=int(document.get("fleet_size", 1)),
            retry_budget=int(document.get("retry_budget", self.config.retry_budget_per_day)),
        )

    # -- inside a unit of work ------------------------------------------------------------------------------------

    def _held(self, job: Any, job_id: int, worker: str, now: datetime, *, cancelled_ok: bool) -> None:
        if job is None:
            raise NotFound("job", str(job_id))
        if not workers.holds(job, worker):
            raise JobNotHeld(f"job {job_id} is not held by {worker}" + workers.whose(job, worker))
        if job.state == CANCELLED and cancelled_ok:
            return
        if job.state != RUNNING:
            raise JobNotHeld(f"job {job_id} is {job.state}, no longer running for {worker}")
        if job.leased_until is not None and job.leased_until < now:
            raise JobNotHeld(f"the lease of job {job_id} ran out; it goes back to the queue")

    def _finish(self, job: Any, state: str, result: Any, now: datetime, *, reason: str | None = None) -> None:
        changes = {"state": state, "result": result, "finished_at": now, "cancel_reason": reason}
        if not rows.swap(job.id, expected_state=RUNNING, changes=changes):
            raise units.StaleRead(f"job {job.id}")

    def _cancel(self, job: Any, *, reason: str, now: datetime, actor: str, ticket: Any) -> None:
        changes = {"state": CANCELLED, "finished_at": now, "cancel_reason": reason}
        if not rows.swap(job.id, expected_state=job.state, changes=changes):
            raise units.StaleRead(f"job {job.id}")
        if tickets.exists(job.ticket):
            timeline.append(
                job.ticket,
                kind="job_cancelled",
                summary=f"job {job.id} ({job.role}) cancelled: {reason}",
                at=now,
                data={"job_id": job.id, "actor": actor, "reason": reason},
            )

    def _failed_ticket(
        self, job: Any, ticket: Any, why: str, *, now: datetime, actor: str, free_bay: str | None = None
    ) -> None:
        """The ticket waits on `agent_failed` (where it is not finished) and the chat hears of it."""
        if ticket is not None and ticket.stage not in FINAL_STAGES:
            self._ticket_step(
                ticket,
                waiting_on="agent_failed",
                kind="job_failed",
                actor=actor,
                now=now,
                summary=f"job {job.id} ({job.role}) failed: {why}",
                data={"job_id": job.id, "reason": why},
                free_bay=free_bay,
            )
        chat.queue(f"{job.ticket}: the {job.role} job {job.id} failed: {why}", source=CHAT_SOURCE, at=now)

    def _ticket_step(
        self,
        ticket: Any,
        *,
        waiting_on: str | None,
        kind: str,
        actor: str,
        now: datetime,
        summary: str,
        data: dict[str, Any],
        free_bay: str | None = None,
    ) -> None:
        """One change of the ticket's wait (its stage unchanged), its one timeline entry, heard by the board's
        listeners; the bay `free_bay` freed with it."""
        if ticket is None or ticket.stage in FINAL_STAGES:
            return
        if free_bay is not None:
            self.board.free_slot(free_bay, ticket, at=now)
        self.board.step_ticket(
            ticket,
            to=None,
            waiting_on=waiting_on,
            kind=kind,
            event=kind,
            actor=actor,
            at=now,
            summary=summary,
            data=data,
        )
