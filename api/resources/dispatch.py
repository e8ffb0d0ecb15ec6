"""Dispatch jobs over HTTP (`domain/dispatch/jobs.py`, `domain/dispatch/forge.py`): a worker's claim, heartbeat and
result; people list, read, cancel and run jobs again, and retry a forge write. Thin: each responder is one domain
call and its answer. A job id in a path is read by `params.job_id` (ASCII digits; anything else is no job)."""

from __future__ import annotations

import falcon

from api import body, params, representations
from api.errors import Problem
from api.operations import CURSOR, IDENTIFIER, LIMIT, WORKERS_ONLY, WORKERS_TOO, Operation, Param
from domain.accounts import WORKER
from domain.clock import iso
from domain.dispatch import workers
from domain.dispatch.forge import ForgeWrites
from domain.dispatch.jobs import STATES, Dispatch, Idle

_JOB_ID = Param(
    "job_id",
    {"type": "string", "pattern": "^[0-9]{1,19}$"},
    "The job's id: ASCII digits (anything else, a sign or a space included, is 404).",
    location="path",
    required=True,
)
_WORKER_ERRORS = {401: "problem.json", 403: "problem.json", 404: "problem.json", 409: "problem.json"}
# The header a 204 to a claim says why in: paused, bay-held, fleet-full or nothing-queued.
IDLE_REASON = "Svc-Idle-Reason"


class Claim:
    operations = {
        "POST": Operation(
            "A worker claims the oldest queued job its bay may run: 200 with the job, its envelope and ticket, and "
            "the lease. 204 when there is none, with `Svc-Idle-Reason` saying why (the first that applies): paused "
            "(dispatch is paused), bay-held (the bay holds a ticket's pull request and that ticket has nothing "
            "queued: the bay is freed when the ticket is done), fleet-full (the policy's fleet size of jobs run), "
            "nothing-queued. A fixer job of a ticket that holds a bay is claimed only into that bay. 403 for a bay "
            "other than the worker's own; 409 while the worker holds a running job (before any 204), or when the "
            "bay was claimed by a person for a ticket the service never ran (workers only)",
            request="dispatch-claim.json",
            responses={200: "dispatch-claim-answer.json", 204: None, **_WORKER_ERRORS, 422: "problem.json"},
            response_notes={204: "Nothing to claim: `Svc-Idle-Reason: paused|bay-held|fleet-full|nothing-queued`."},
            tags=("dispatch",),
            workers=WORKERS_ONLY,
        ),
    }

    def __init__(self, dispatch: Dispatch):
        self.dispatch = dispatch

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        claimed = self.dispatch.claim(req.context.body["bay"], worker=req.context.identity.actor)
        if isinstance(claimed, Idle):
            resp.status = falcon.HTTP_204
            resp.set_header(IDLE_REASON, claimed.reason)
            return
        job = representations.job(claimed.job)
        job["envelope"] = claimed.envelope
        job["ticket"] = representations.ticket(claimed.ticket)
        resp.media = {"job": job, "lease_seconds": claimed.lease_seconds}


class Heartbeat:
    operations = {
        "POST": Operation(
            "A worker renews the lease of the job it holds; cancel: true tells it to stop (the job was cancelled, or "
            "its ticket is done, cancelled or blocked); 409 for a job it does not hold (workers only)",
            request="ops-empty-request.json",
            request_optional=True,
            responses={200: "dispatch-heartbeat.json", **_WORKER_ERRORS, 422: "problem.json"},
            params=(_JOB_ID,),
            tags=("dispatch",),
            workers=WORKERS_ONLY,
        ),
    }

    def __init__(self, dispatch: Dispatch):
        self.dispatch = dispatch

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        beat = self.dispatch.heartbeat(params.job_id(job_id), worker=req.context.identity.actor)
        resp.media = {"leased_until": iso(beat.leased_until), "cancel": beat.cancel, "reason": beat.reason}


class Result:
    operations = {
        "POST": Operation(
            "A worker hands back its output (svc.worker-output/v0): the output gate checks it against the schema, the "
            "job's ticket and role, and the branch prefix. Refused: 422 naming every violation (problem type "
            "output-refused), the job failed, nothing written to the forge. A body that is not a JSON object (not "
            "JSON, empty, an array, another media type): 422 with problem type bad-output, the job failed with the "
            "first 4 KiB of the text. Accepted: 200 with the job (changes_ready queues the forge write; held while "
            "dispatch is paused). 409 for a job it does not hold or that is no longer running, a cancelled one "
            "included: nothing is written (workers only)",
            request="worker-output.json",
            raw_body=True,
            responses={200: "dispatch-job.json", **_WORKER_ERRORS, 413: "problem.json", 422: "problem.json"},
            params=(_JOB_ID,),
            tags=("dispatch",),
            workers=WORKERS_ONLY,
        ),
    }

    def __init__(self, dispatch: Dispatch):
        self.dispatch = dispatch

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        ident, worker = params.job_id(job_id), req.context.identity.actor
        raw: bytes = req.context.raw_body
        document = body.json_object(raw) if body.is_json_media(req.content_type) else None
        if document is None:
            failed = self.dispatch.bad_output(ident, raw.decode("utf-8", "replace"), worker=worker)
            raise Problem(
                422,
                "bad-output",
                f"the result is not a JSON object (svc.worker-output/v0): job {failed.id} failed and nothing was "
                "written to the forge",
                extra={"job": representations.job(failed)},
            )
        finished = self.dispatch.result(ident, document, worker=worker)
        if finished.refused:
            errors = [v.as_dict() for v in finished.violations]
            raise Problem(
                422,
                "output-refused",
                f"the output gate refused the output in {len(errors)} place(s): job {finished.job.id} failed and "
                "nothing was written to the forge",
                errors=errors,
                extra={"job": representations.job(finished.job)},
            )
        resp.media = representations.job(finished.job)


class Jobs:
    operations = {
        "GET": Operation(
            "Dispatch jobs, newest first, filtered by state or ticket",
            responses={200: "dispatch-job-list.json", 400: "problem.json", 401: "problem.json", 403: "problem.json"},
            params=(
                Param("state", {"type": "string", "enum": list(STATES)}),
                Param("ticket", IDENTIFIER),
                LIMIT,
                CURSOR,
            ),
            tags=("dispatch",),
        ),
    }

    def __init__(self, dispatch: Dispatch):
        self.dispatch = dispatch

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        rows, after = self.dispatch.jobs(
            limit=params.limit(req),
            cursor=params.cursor(req),
            state=params.choice(req, "state", STATES),
            ticket=params.text(req, "ticket", max_length=64),
        )
        resp.media = representations.page("jobs", [representations.job(r) for r in rows], after)


class Workers:
    operations = {
        "GET": Operation(
            "The workers, by account name: each one's bay (the only one it claims into), the id of the job it runs "
            "(null when none) and when it was last heard (a claim, a heartbeat or a result, refused ones too)",
            responses={200: "dispatch-worker-list.json", 400: "problem.json", 401: "problem.json", 403: "problem.json"},
            params=(LIMIT, CURSOR),
            tags=("dispatch",),
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        views, after = workers.page(limit=params.limit(req), cursor=params.cursor(req))
        resp.media = representations.page("workers", [representations.worker(v) for v in views], after)


class Job:
    operations = {
        "GET": Operation(
            "One dispatch job (a worker: only a job it claimed; 409 for one an earlier account of its name claimed)",
            responses={200: "dispatch-job.json", **_WORKER_ERRORS},
            params=(_JOB_ID,),
            tags=("dispatch",),
            workers=WORKERS_TOO,
        ),
    }

    def __init__(self, dispatch: Dispatch):
        self.dispatch = dispatch

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        ident = params.job_id(job_id)
        identity = req.context.identity
        if identity.role == WORKER:
            self.dispatch.check_worker_reads_job(identity.actor, ident)
        resp.media = representations.job(self.dispatch.job(ident))


class Cancel:
    operations = {
        "POST": Operation(
            "Cancel a held, queued or running job (its worker's next heartbeat says cancel; a result it sends after "
            "is 409 and writes nothing); 409 for one that ended",
            request="ticket-action.json",
            request_optional=True,
            responses={200: "dispatch-job.json", **_WORKER_ERRORS, 422: "problem.json"},
            params=(_JOB_ID,),
            tags=("dispatch",),
        ),
    }

    def __init__(self, dispatch: Dispatch):
        self.dispatch = dispatch

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        row = self.dispatch.cancel(
            params.job_id(job_id), actor=req.context.identity.actor, reason=req.context.body.get("reason")
        )
        resp.media = representations.job(row)


class Retry:
    operations = {
        "POST": Operation(
            "Run a failed or cancelled job again (operator): 201 with a new job for the same decision, ticket and "
            "role, queued (held while dispatch is paused), retry_of the old one; 409 when the job did not end so, "
            "its ticket is finished, or the ticket has a job held, queued or running",
            request="ops-empty-request.json",
            request_optional=True,
            responses={201: "dispatch-job.json", **_WORKER_ERRORS, 422: "problem.json"},
            params=(_JOB_ID,),
            tags=("dispatch",),
        ),
    }

    def __init__(self, dispatch: Dispatch):
        self.dispatch = dispatch

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        made = self.dispatch.retry(params.job_id(job_id), actor=req.context.identity.actor)
        resp.status = falcon.HTTP_201
        resp.location = f"/api/v1/dispatch/jobs/{made.id}"
        resp.media = representations.job(made)


class ForgeRetry:
    operations = {
        "POST": Operation(
            "Queue a failed forge write of a job again (operator): 202 with the job, its forge.state pending; 409 "
            "unless its forge write failed",
            request="ops-empty-request.json",
            request_optional=True,
            responses={202: "dispatch-job.json", **_WORKER_ERRORS, 422: "problem.json"},
            params=(_JOB_ID,),
            tags=("dispatch",),
        ),
    }

    def __init__(self, writes: ForgeWrites):
        self.writes = writes

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        job = self.writes.retry(params.job_id(job_id), actor=req.context.identity.actor)
        resp.status = falcon.HTTP_202
        resp.media = representations.job(job)


def routes(services) -> list[tuple[str, object]]:
    dispatch = services.dispatch
    return [
        ("/api/v1/dispatch/claim", Claim(dispatch)),
        ("/api/v1/dispatch/jobs", Jobs(dispatch)),
        ("/api/v1/dispatch/workers", Workers()),
        ("/api/v1/dispatch/jobs/{job_id}", Job(dispatch)),
        ("/api/v1/dispatch/jobs/{job_id}/heartbeat", Heartbeat(dispatch)),
        ("/api/v1/dispatch/jobs/{job_id}/result", Result(dispatch)),
        ("/api/v1/dispatch/jobs/{job_id}/cancel", Cancel(dispatch)),
        ("/api/v1/dispatch/jobs/{job_id}/retry", Retry(dispatch)),
        ("/api/v1/dispatch/jobs/{job_id}/forge/retry", ForgeRetry(services.forge_writes)),
    ]
