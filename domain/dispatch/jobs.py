"""Dispatch jobs (rows: `storage/jobs.py`; their lifecycle: `machines/job.py`, fired here and nowhere else): a live
rule's passing decision queues one (held while dispatch is paused); a worker in a bay claims it, heartbeats, and hands
back its output, which passes the output gate before anything is written to the forge.

| event      | when                                                                                                 |
|------------|------------------------------------------------------------------------------------------------------|
| (new)      | a live rule's decision passed every gate (`queue`): queued, or held while paused; an operator's retry |
| `release`  | dispatch resumed: every held job is queued, the oldest first                                         |
| `claim`    | a worker in a bay took the oldest job it may run there, within the policy's fleet size               |
| `succeed`  | its output passed the gate, `no_changes` or `changes_ready` (then its forge write is queued)           |
| `fail`     | its output was refused or not JSON (`output`), the worker said it failed (`worker`), or its lease ran |
|            | out `SVC_WORKER_LEASE_ATTEMPTS` times (`lease`)                                                       |
| `put_back` | its lease ran out, fewer times than that: queued again for any bay                                    |
| `cancel`   | an operator cancelled it; its ticket was finished or blocked (`ticket_moved`, a stage listener)       |

Every change of a job's state is one `_move`: the machine's event, a compare-and-swap of the row, and the ticket's
`job` (the job a worker is on for it) kept with it. A ticket with a job queued or running is not needs-you.

The bay (a slot) at the end of a job: a claim holds the worker's bay for the job's ticket, as `POST slots/{name}/claim`
does, and the bay stays the ticket's while its pull request is in CI and with people (a fixer job of that ticket may
be claimed only there); it is freed when the ticket is done (the loop, `pull_requests.py`) or cancelled. A job that
ends with no changes frees the bay (nothing in it is worth keeping), and so does a lease that ran out: the job may run
again in another bay, and the idle reclaim wipes what was left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from contracts import Violation
from contracts.envelope import CHANGES_READY, OUTPUT_FAILED, worker_output_violations
from domain import chat, units
from domain.board import Board, StageChange
from domain.clock import Clock
from domain.config import Config
from domain.dispatch import output_gate, switch, workers
from domain.errors import Conflict, Forbidden, NotFound, TransitionForbidden
from domain.policy.document import Policy
from domain.policy.in_force import PolicyInForce
from machines import forge_write
from machines import job as machine
from machines.stages import FINAL_STAGES, HUMAN_GATE_STAGES, STOP_STAGES
from storage import decisions, outbox, slots, tickets, timeline
from storage import jobs as rows
from storage.jobs import Job
from storage.models import JSON, Ticket

_T = TypeVar("_T")

__all__ = ["STATES", "Dispatch", "Job", "JobNotHeld", "NotYours"]

STATES = machine.STATES
# The outbox kind of the forge writes of a job whose output was accepted with changes (`jobs/forge_writes.py`).
FORGE_WRITE_KIND = "forge_write"
REAP_BATCH = 50
CHAT_SOURCE = "dispatch"
SHOWN = 300  # characters of an output that is not even an object, kept as the job's result
BAD_OUTPUT_KEPT = 4096  # characters of a result that is not JSON kept as its failure's detail
# The output gate's violations kept in a refused job's failure (its page and `GET dispatch/jobs/{id}` show them):
# every one, up to this many (the 422 itself names them all).
REASONS_KEPT = 20
# Why a claim found nothing for the bay, the first that applies (the 204's `Svc-Idle-Reason`).
PAUSED, BAY_HELD, FLEET_FULL, NOTHING_QUEUED = "paused", "bay-held", "fleet-full", "nothing-queued"
# What each kind of failure says (`failure.kind`).
OUTPUT, WORKER, LEASE, FORGE, CANCELLED = "output", "worker", "lease", "forge", "cancelled"
WORKER_KIND = "agent"  # what a worker account acts as, on the board's own events


class JobNotHeld(Conflict):
    """A heartbeat or result for a job this worker does not hold (never its claim, another worker's, a lease that
    ran out and was put back), or a result for a job no longer running."""


class NotYours(Forbidden):
    """A worker asked for a job or ticket other than the ones it holds or held."""


@dataclass(frozen=True)
class Claimed:
    """What a claim hands the worker: the job, the envelope of the decision that queued it, its ticket."""

    job: Job
    envelope: JSON
    ticket: Ticket
    lease_seconds: int


@dataclass(frozen=True)
class Idle:
    """A claim that found nothing for the bay, and why (`PAUSED`, `BAY_HELD`, `FLEET_FULL`, `NOTHING_QUEUED`)."""

    reason: str


@dataclass(frozen=True)
class Beat:
    leased_until: datetime | None
    cancel: bool
    reason: str | None


@dataclass(frozen=True)
class Finished:
    """A result taken: the job as it now is, and the output gate's violations (refused when there are any)."""

    job: Job
    violations: list[Violation]

    @property
    def refused(self) -> bool:
        return bool(self.violations)


@dataclass(frozen=True)
class Queued:
    """What a live decision's dispatch did: the job it queued (or holds while paused), or the one already on the
    work it asked for (a fixer job for the same failing head, a job of the ticket not yet ended)."""

    job_id: int
    held: bool


def paused() -> bool:
    """Whether the switch holds dispatch (inside a unit of work)."""
    return switch.read().paused


class Dispatch:
    """The units of work over jobs: claim, heartbeat, result, cancel, retry, the switch, the lease reaper, reading
    them; and, inside the router's unit of work, the job a live decision queues."""

    def __init__(self, config: Config, clock: Clock, board: Board, *, policy: PolicyInForce | None = None):
        self.config = config
        self.clock = clock
        self.board = board
        self.lease = timedelta(seconds=config.worker_lease_seconds)
        # The policy in force: its fleet size is what a claim counts against (the fleet gate reads the same).
        self.policy = policy or PolicyInForce(Policy.from_config(config))

    # -- reading -------------------------------------------------------------------------------------------------

    def job(self, job_id: int) -> Job:
        found = rows.get(job_id)
        if found is None:
            raise NotFound("job", str(job_id))
        return found

    def jobs(
        self, *, limit: int, cursor: str | None, state: str | None, ticket: str | None
    ) -> tuple[list[Job], str | None]:
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

    # -- a live decision's job (inside the router's unit of work) -------------------------------------------------

    def queue(
        self,
        *,
        decision_id: int,
        event_id: str | None,
        ticket: str,
        role: str,
        rule: str | None,
        head_sha: str | None,
        at: datetime,
    ) -> Queued:
        """The job a live rule's passing decision asks for, and the decision marked so: a new one (held while
        dispatch is paused), unless one is on that work already: for a fixer, one for the same failing head (whatever
        became of it: one fixer job per failing head); for a coder, a job of the ticket that has not ended."""
        if role == "fixer":
            # One fixer job per failing head: a new head that fails is new work, whatever else runs for the ticket.
            existing = rows.fixer_for_head(ticket, head_sha) if head_sha else None
        else:
            waiting = rows.of_ticket(ticket, states=machine.CANCELLABLE)
            existing = waiting[-1] if waiting else None
        if existing is not None:
            held = existing.state == machine.HELD
            rows.mark_dispatched(decision_id, existing.id, held=held)
            return Queued(existing.id, held)
        state = machine.first_state(paused=paused())
        job = rows.insert(
            decision_id=decision_id,
            event_id=event_id,
            ticket=ticket,
            role=role,
            rule=rule,
            state=state,
            at=at,
            head_sha=head_sha if role == "fixer" else None,
        )
        rows.mark_dispatched(decision_id, job.id, held=state == machine.HELD)
        self._job_on_ticket(job.ticket, job.id, state, at=at)
        return Queued(job.id, state == machine.HELD)

    # -- a worker's calls ----------------------------------------------------------------------------------------

    def claim(self, bay: str, *, worker: str) -> Claimed | Idle:
        """The oldest queued job this bay may run, now running in it under a lease for `worker`; else `Idle`, saying
        why (the first that applies): dispatch is paused; the bay is held by a ticket with nothing to run now; the
        policy's fleet size of jobs already runs; nothing is queued for this bay. The bay is held for the job's
        ticket, and the ticket moves to `execute` waiting on `agent` where its machine allows it, with one timeline
        entry.

        A job whose ticket holds a bay runs only there (its pull request's work is in it); a bay its ticket holds
        takes only that ticket's jobs. A queued job whose ticket was finished, blocked or taken to a human gate since
        its decision is cancelled on the way (saying why)."""

        def work() -> Claimed | Idle:
            rows.serialise_claims()  # before anything is counted: claims take turns from here
            me = workers.admit_claim(worker, bay, now=self.clock())  # its own bay, one job at a time: before a 204
            if paused():
                return Idle(PAUSED)
            now = self.clock()
            holder = slots.claim_of(bay)
            bay_ticket = holder.ticket_key if holder is not None else None
            job, ticket, elsewhere = self._claimable(bay, bay_ticket, worker=worker, now=now)
            running = rows.count_running()
            full = running >= self.policy().fleet_size
            if job is None:
                if bay_ticket is not None and elsewhere and not rows.any_of_ticket(bay_ticket):
                    # A person's claim holds the bay for a ticket the service never ran: a worker sat in the wrong bay.
                    raise Conflict(f"slot {bay} is held by {bay_ticket}")
                if bay_ticket is not None:
                    return Idle(BAY_HELD)
                return Idle(FLEET_FULL if full else NOTHING_QUEUED)
            if full:
                return Idle(FLEET_FULL)
            return self._start(job, ticket, bay, worker=worker, principal=me.principal, now=now)

        return self._for_worker(worker, work, what="claiming a job")

    def _claimable(
        self, bay: str, bay_ticket: str | None, *, worker: str, now: datetime
    ) -> tuple[Job | None, Ticket | None, bool]:
        """The oldest queued job this bay may run and its ticket (None, None when there is none), and whether a job
        was skipped because the bay is another ticket's."""
        after, elsewhere = 0, False
        while True:
            job = rows.oldest_queued(after=after)
            if job is None:
                return None, None, elsewhere
            after = job.id
            ticket = tickets.get(job.ticket, for_update=True)
            gone = f"{job.ticket} is {ticket.stage if ticket else 'not on the board'}"
            if ticket is None or ticket.stage in STOP_STAGES:
                self._stop(job, ticket, why=f"{gone}: nothing to do", actor=worker, now=now)
                continue
            if ticket.stage in HUMAN_GATE_STAGES:
                self._stop(job, ticket, why=f"{gone}: a person has it now", actor=worker, now=now)
                continue
            if bay_ticket is not None and bay_ticket != job.ticket:
                elsewhere = True
                continue  # the bay holds another ticket's work
            if ticket.assigned_slot and ticket.assigned_slot != bay:
                continue  # its ticket works in another bay: that bay's worker takes it
            return job, ticket, elsewhere

    def _for_worker(self, worker: str, work: Callable[[], _T], *, what: str) -> _T:
        """`units.run(work)` for a worker's call; a refusal of it is kept for the board (`workers.refused`)."""
        try:
            return units.run(work, what=what)
        except (Forbidden, Conflict) as refusal:
            workers.refused(worker, str(refusal), at=self.clock())
            raise

    def _start(self, job: Job, ticket: Ticket, bay: str, *, worker: str, principal: str, now: datetime) -> Claimed:
        self.board.hold_slot(bay, ticket, actor=worker, at=now, record=False, job_id=job.id)
        until = now + self.lease
        self._move(
            job,
            "claim",
            {
                "bay": bay,
                "worker": worker,
                "worker_principal": principal,
                "claimed_at": now,
                "heartbeat_at": now,
                "leased_until": until,
            },
            now=now,
            ticket=ticket,
        )
        self.board.step_ticket(
            ticket,
            move="start",
            waiting_on="agent",
            kind="job_claimed",
            event="claim",
            actor=worker,
            actor_kind=WORKER_KIND,
            at=now,
            summary=f"claimed by {worker} in {bay} (job {job.id}, {job.role})",
            data={"job_id": job.id, "bay": bay, "worker": worker, "role": job.role, "attempt": job.attempts + 1},
        )
        decision = decisions.get(job.decision_id)
        claimed = rows.get(job.id)
        assert claimed is not None  # moved to running just now, in this transaction
        return Claimed(claimed, decision.envelope if decision else None, ticket, int(self.lease.total_seconds()))

    def heartbeat(self, job_id: int, *, worker: str) -> Beat:
        """Renew the lease of a job `worker` holds; `cancel` when the job was cancelled, or its ticket is done,
        cancelled or blocked (the job is then cancelled here, so the fleet has room again)."""

        def work() -> Beat:
            job = rows.get(job_id, for_update=True)
            now = self.clock()
            job = self._held(job, job_id, worker, now, cancelled_ok=True)
            workers.heard(worker, now=now)
            if job.state == machine.CANCELLED:
                return Beat(job.leased_until, True, job.failure_detail)
            ticket = tickets.get(job.ticket, for_update=True)
            if ticket is None or ticket.stage in STOP_STAGES:
                why = f"{job.ticket} is {ticket.stage if ticket else 'gone'}"
                self._stop(job, ticket, why=why, actor=worker, now=now)
                return Beat(job.leased_until, True, why)
            until = now + self.lease
            changes = {"leased_until": until, "heartbeat_at": now}
            if not rows.swap(job_id, expected_state=machine.RUNNING, changes=changes, worker=worker):
                raise units.StaleRead(f"job {job_id}")
            if job.bay:
                self.board.touch_slot(job.bay, at=now)
            return Beat(until, False, None)

        return self._for_worker(worker, work, what=f"the heartbeat of job {job_id}")

    def result(self, job_id: int, output: JSON, *, worker: str) -> Finished:
        """The output gate, then the job's end: refused (violations), the job fails (`output`); said `failed`, it
        fails (`worker`); either way its ticket waits on `agent_failed` with a chat post. `no_changes`: it succeeds
        and frees its bay; `changes_ready`: it succeeds and its forge write is queued (held while paused), in the
        same transaction. Nothing reaches the forge from here."""

        def work() -> Finished:
            job = rows.get(job_id, for_update=True)
            now = self.clock()
            job = self._held(job, job_id, worker, now, cancelled_ok=False)
            workers.heard(worker, now=now)
            violations = self.gate(job, output)
            ticket = tickets.get(job.ticket, for_update=True)
            kept = output if isinstance(output, dict) else {"not_an_object": repr(output)[:SHOWN]}
            status = output.get("status") if isinstance(output, dict) else None
            if violations:
                why = (
                    f"the output gate refused its output ({len(violations)} violation(s): "
                    + "; ".join(f"{v.path or '/'}: {v.message}" for v in violations[:REASONS_KEPT])
                    + (f"; and {len(violations) - REASONS_KEPT} more" if len(violations) > REASONS_KEPT else "")
                    + ")"
                )
                self._fail(job, ticket, kind=OUTPUT, why=why, result=kept, actor=worker, now=now)
            elif status == OUTPUT_FAILED:
                why = f"the worker said it failed: {output.get('summary', '')}"
                self._fail(job, ticket, kind=WORKER, why=why, result=kept, actor=worker, now=now)
            elif status == CHANGES_READY:
                state = forge_write.first_state(paused=paused())
                changes = {"result": kept, "finished_at": now, "forge_state": state}
                self._move(job, "succeed", changes, now=now, ticket=ticket)
                if state == forge_write.PENDING:
                    outbox.enqueue(FORGE_WRITE_KIND, {"job_id": job.id}, at=now)
                self._ticket_step(
                    ticket,
                    waiting_on=None,
                    kind="job_succeeded",
                    actor=worker,
                    now=now,
                    summary=f"job {job.id} ({job.role}) has changes ready on {output['branch']}; "
                    + (
                        "its forge write is queued"
                        if state == forge_write.PENDING
                        else "dispatch is paused: its forge write is held until it resumes"
                    ),
                    data={"job_id": job.id, "status": status, "branch": output["branch"]},
                )
            else:
                self._move(job, "succeed", {"result": kept, "finished_at": now}, now=now, ticket=ticket)
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
            finished = rows.get(job.id)
            assert finished is not None
            return Finished(finished, violations)

        return self._for_worker(worker, work, what=f"the result of job {job_id}")

    def bad_output(self, job_id: int, text: str, *, worker: str) -> Job:
        """A result whose body is not a JSON object (not JSON, empty, an array): the job fails (`output`), the first
        4 KiB of the text its failure's detail, and its ticket waits on `agent_failed`. `JobNotHeld` as `result`."""

        def work() -> Job:
            job = rows.get(job_id, for_update=True)
            now = self.clock()
            job = self._held(job, job_id, worker, now, cancelled_ok=False)
            ticket = tickets.get(job.ticket, for_update=True)
            # As sent, but storable: a NUL character no database text holds.
            detail = text[:BAD_OUTPUT_KEPT].replace("\x00", "\ufffd")
            why = f"its output is not a JSON object: {detail}" if detail.strip() else "its output was empty"
            self._fail(job, ticket, kind=OUTPUT, why=why, result=None, actor=worker, now=now, detail=detail)
            failed = rows.get(job.id)
            assert failed is not None
            return failed

        return units.run(work, what=f"the result of job {job_id}")

    def gate(self, job: Job, output: JSON) -> list[Violation]:
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

    # -- people's calls, the switch and the reaper ----------------------------------------------------------------

    def cancel(self, job_id: int, *, actor: str, reason: str | None = None) -> Job:
        """Cancel a held, queued or running job (its worker's next heartbeat says so); `Conflict` for one that ended."""

        def work() -> Job:
            job = rows.get(job_id, for_update=True)
            if job is None:
                raise NotFound("job", str(job_id))
            if job.state not in machine.CANCELLABLE:
                raise Conflict(f"job {job_id} is {job.state}; only a held, queued or running job can be cancelled")
            self._stop(job, None, why=reason or f"cancelled by {actor}", actor=actor, now=self.clock())
            cancelled = rows.get(job_id)
            assert cancelled is not None
            return cancelled

        return units.run(work, what=f"cancelling job {job_id}")

    def retry(self, job_id: int, *, actor: str) -> Job:
        """Run a failed or cancelled job again: a new job for the same decision, ticket and role, `retry_of` the old
        one, queued (held while paused). `Conflict` for a job that did not end so, a ticket that is finished, or one
        with a job still waiting or running."""

        def work() -> Job:
            old = rows.get(job_id, for_update=True)
            if old is None:
                raise NotFound("job", str(job_id))
            if old.state not in machine.RETRYABLE:
                raise Conflict(f"job {job_id} is {old.state}; only a failed or cancelled job can be run again")
            ticket = tickets.get(old.ticket, for_update=True)
            if ticket is None or ticket.stage in FINAL_STAGES:
                stage = ticket.stage if ticket is not None else None
                said = f"{old.ticket} is {stage}" if stage else f"{old.ticket} is not on the board"
                raise Conflict(f"{said}: there is nothing to run again", current_stage=stage)
            busy = rows.of_ticket(old.ticket, states=machine.CANCELLABLE)
            if busy:
                raise Conflict(f"{old.ticket} has job {busy[-1].id} {busy[-1].state}; cancel it first")
            now = self.clock()
            state = machine.first_state(paused=paused())
            job = rows.insert(
                decision_id=old.decision_id,
                event_id=old.event_id,
                ticket=old.ticket,
                role=old.role,
                rule=old.rule,
                state=state,
                at=now,
                retry_of=old.id,
                head_sha=old.head_sha,
            )
            self._job_on_ticket(job.ticket, job.id, state, at=now)
            timeline.append(
                old.ticket,
                kind="job_retried",
                summary=f"job {old.id} ({old.role}) run again as job {job.id} by {actor}"
                + (" (held: dispatch is paused)" if state == machine.HELD else ""),
                at=now,
                data={"job_id": job.id, "retry_of": old.id, "actor": actor},
            )
            return job

        return units.run(work, what=f"running job {job_id} again")

    def set_switch(self, *, paused: bool, reason: str | None, actor: str | None) -> switch.Switch:
        """Pause (`reason` required) or resume all live dispatch, in one unit of work; resuming queues every held job,
        the oldest first, and releases every held forge write. The switch as it is then."""
        reason = switch.checked_reason(paused=paused, reason=reason)

        def work() -> switch.Switch:
            now = self.clock()
            was = switch.read()
            changed = switch.write(paused=paused, reason=reason, actor=actor, at=now)
            if was.paused and not paused:
                for job in rows.held_oldest_first():
                    self._move(job, "release", {}, now=now)
                for job in rows.forge_held():
                    if rows.set_forge(
                        job.id,
                        expected_state=forge_write.HELD,
                        changes={"forge_state": forge_write.fire(forge_write.HELD, "release")},
                    ):
                        outbox.enqueue(FORGE_WRITE_KIND, {"job_id": job.id}, at=now)
            return changed

        return units.run(work, what="setting the dispatch switch")

    def reap(self, *, limit: int = REAP_BATCH) -> int:
        """Put back every running job whose lease ran out (attempts + 1, its bay freed), or fail it (`lease`) once its
        attempts reach `SVC_WORKER_LEASE_ATTEMPTS` (its ticket then waits on `agent_failed`, with a chat post).
        Returns how many it handled; one unit of work."""

        def work() -> int:
            now = self.clock()
            expired = rows.lease_ran_out(now, limit=limit)
            for job in expired:
                self._expired(job, now=now)
            return len(expired)

        return units.run(work, what="putting back jobs whose lease ran out")

    def _expired(self, job: Job, *, now: datetime) -> None:
        attempts = job.attempts + 1
        limit = self.config.worker_lease_attempts
        ticket = tickets.get(job.ticket, for_update=True)
        lapsed = f"the lease of job {job.id} ({job.worker} in {job.bay}) ran out"
        if attempts >= limit:
            why = f"{lapsed} {attempts} time(s), SVC_WORKER_LEASE_ATTEMPTS ({limit})"
            self._fail(job, ticket, kind=LEASE, why=why, actor="jobs", now=now, attempts=attempts, free_bay=job.bay)
            return
        self._move(job, "put_back", {"attempts": attempts, "leased_until": None, "bay": None}, now=now, ticket=ticket)
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

    # -- the board's listener -----------------------------------------------------------------------------------

    def ticket_moved(self, change: StageChange) -> None:
        """Stage listener: a ticket finished, cancelled or blocked has its held, queued and running jobs cancelled,
        in the change's transaction (a running job's worker hears it at its next heartbeat)."""
        if change.to_stage not in STOP_STAGES or change.from_stage == change.to_stage:
            return
        for job in rows.of_ticket(change.ticket.key, states=machine.CANCELLABLE):
            why = f"{change.ticket.key} is {change.to_stage}"
            self._stop(job, change.ticket, why=why, actor=change.actor, now=change.at)

    def cancel_jobs_of(self, ticket: Ticket, *, why: str, actor: str, now: datetime) -> None:
        """Inside a transaction: cancel the ticket's held, queued and running jobs (its pull request was merged)."""
        for job in rows.of_ticket(ticket.key, states=machine.CANCELLABLE):
            self._stop(job, ticket, why=why, actor=actor, now=now)

    # -- inside a unit of work ------------------------------------------------------------------------------------

    def _move(
        self,
        job: Job,
        event: str,
        changes: dict[str, object],
        *,
        now: datetime,
        ticket: Ticket | None = None,
    ) -> str:
        """Fire `event` on the job (the machine says where it goes, or refuses), compare-and-swap its row, and keep
        its ticket's job with it. Returns the new state."""
        try:
            state = machine.fire(job.state, event)
        except TransitionForbidden as exc:
            raise JobNotHeld(f"job {job.id} is {job.state}: {exc}") from None
        if not rows.swap(job.id, expected_state=job.state, changes={**changes, "state": state}):
            raise units.StaleRead(f"job {job.id}")
        self._job_on_ticket(job.ticket, job.id, state, at=now, row=ticket)
        return state

    def _job_on_ticket(self, key: str, job_id: int, state: str, *, at: datetime, row: Ticket | None = None) -> None:
        """The ticket's `job`: this one while it is queued or running; none once it is no longer (unless another is
        the ticket's job by then)."""
        ticket = row if row is not None else tickets.get(key, for_update=True)
        if ticket is None:
            return
        if state in machine.ACTIVE:
            wanted: tuple[int | None, str | None] = (job_id, state)
        elif ticket.job_id == job_id:
            others = [job for job in rows.of_ticket(key, states=machine.ACTIVE) if job.id != job_id]
            wanted = (others[-1].id, others[-1].state) if others else (None, None)
        else:
            return
        if (ticket.job_id, ticket.job_state) != wanted:
            self.board.set_job(ticket, *wanted, at=at)

    def _held(self, job: Job | None, job_id: int, worker: str, now: datetime, *, cancelled_ok: bool) -> Job:
        if job is None:
            raise NotFound("job", str(job_id))
        if not workers.holds(job, worker):
            raise JobNotHeld(f"job {job_id} is not held by {worker}" + workers.whose(job, worker))
        if job.state == machine.CANCELLED and cancelled_ok:
            return job
        if job.state == machine.CANCELLED:
            raise JobNotHeld(f"job {job_id} was cancelled ({job.failure_detail}); its result is not taken")
        if job.state != machine.RUNNING:
            raise JobNotHeld(f"job {job_id} is {job.state}, no longer running for {worker}")
        if job.leased_until is not None and job.leased_until < now:
            raise JobNotHeld(f"the lease of job {job_id} ran out; it goes back to the queue")
        return job

    def _fail(
        self,
        job: Job,
        ticket: Ticket | None,
        *,
        kind: str,
        why: str,
        actor: str,
        now: datetime,
        result: JSON = None,
        detail: str | None = None,
        attempts: int | None = None,
        free_bay: str | None = None,
    ) -> None:
        """The job fails (`kind`, `detail` or `why` in words); its ticket waits on `agent_failed` (where it is not
        finished) and the chat hears of it."""
        changes: dict[str, object] = {"finished_at": now, "failure_kind": kind, "failure_detail": detail or why}
        if result is not None:
            changes["result"] = result
        if attempts is not None:
            changes["attempts"] = attempts
        self._move(job, "fail", changes, now=now, ticket=ticket)
        if ticket is not None and ticket.stage not in FINAL_STAGES:
            self._ticket_step(
                ticket,
                waiting_on="agent_failed",
                kind="job_failed",
                actor=actor,
                now=now,
                summary=f"job {job.id} ({job.role}) failed: {why}",
                data={"job_id": job.id, "reason": why, "failure": kind},
                free_bay=free_bay,
            )
        chat.queue(f"{job.ticket}: the {job.role} job {job.id} failed: {why}", source=CHAT_SOURCE, at=now)

    def _stop(self, job: Job, ticket: Ticket | None, *, why: str, actor: str, now: datetime) -> None:
        """Cancel the job (`cancelled`, saying why), with a timeline entry on its ticket."""
        self._move(
            job,
            "cancel",
            {"finished_at": now, "failure_kind": CANCELLED, "failure_detail": why},
            now=now,
            ticket=ticket,
        )
        if tickets.exists(job.ticket):
            timeline.append(
                job.ticket,
                kind="job_cancelled",
                summary=f"job {job.id} ({job.role}) cancelled: {why}",
                at=now,
                data={"job_id": job.id, "actor": actor, "reason": why},
            )

    def _ticket_step(
        self,
        ticket: Ticket | None,
        *,
        waiting_on: str | None,
        kind: str,
        actor: str,
        now: datetime,
        summary: str,
        data: dict[str, object],
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
            move=None,
            waiting_on=waiting_on,
            kind=kind,
            event=kind,
            actor=actor,
            actor_kind=None if actor == "jobs" else WORKER_KIND,
            at=now,
            summary=summary,
            data=dict(data),
        )
