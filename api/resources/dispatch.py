"""Dispatch jobs over HTTP (`domain/dispatch/jobs.py`): a worker's claim, heartbeat and result; people list, read and
cancel jobs. Thin: each responder is one domain call and its answer."""

from __future__ import annotations

import falcon

from api import params, representations
from api.errors import Problem
from api.operations import CURSOR, IDENTIFIER, LIMIT, WORKERS_ONLY, WORKERS_TOO, Operation, Param
from domain.accounts import WORKER
from domain.clock import iso
from domain.dispatch import workers
from domain.dispatch.jobs import STATES, Dispatch
from domain.errors import NotFound

_JOB_ID = Param("job_id", {"type": "integer", "minimum": 1}, "The job's id.", location="path", required=True)
_WORKER_ERRORS = {401: "problem.json", 403: "problem.json", 404: "problem.json", 409: "problem.json"}


def _job_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise NotFound("job", text) from None
    if not 0 < value < 2**63:
        raise NotFound("job", text)
    return value


class Claim:
    operations = {
        "POST": Operation(
            "A worker claims the oldest queued job for its bay: 200 with the job, its envelope and ticket, and the "
            "lease; 204 when nothing is queued, the policy's fleet size of jobs already run, or dispatch is paused; "
            "403 for a bay other than the worker's own; 409 while the worker holds a running job (before any 204), "
            "or when the bay is held by another ticket (workers only)",
            request="dispatch-claim.json",
            responses={200: "dispatch-claim-answer.json", 204: None, **_WORKER_ERRORS, 422: "problem.json"},
            tags=("dispatch",),
            workers=WORKERS_ONLY,
        ),
    }

    def __init__(self, dispatch: Dispatch):
        self.dispatch = dispatch

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        claimed = self.dispatch.claim(req.context.body["bay"], worker=req.context.identity.actor)
        if claimed is None:
            resp.status = falcon.HTTP_204
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
        beat = self.dispatch.heartbeat(_job_id(job_id), worker=req.context.identity.actor)
        resp.media = {"leased_until": iso(beat.leased_until), "cancel": beat.cancel, "reason": beat.reason}


class Result:
    operations = {
        "POST": Operation(
            "A worker hands back its output (svc.worker-output/v0): the output gate checks it against the schema, the "
            "job's ticket and role, and the branch prefix. Refused: 422 naming every violation, the job failed, "
            "nothing written to the forge. Accepted: 200 with the job (changes_ready queues the forge writes). 409 "
            "for a job it does not hold or that is no longer running (workers only)",
            request="worker-output.json",
            request_checked="dispatch-result-submission.json",
            responses={200: "dispatch-job.json", **_WORKER_ERRORS, 413: "problem.json", 422: "problem.json"},
            params=(_JOB_ID,),
            tags=("dispatch",),
            workers=WORKERS_ONLY,
        ),
    }

    def __init__(self, dispatch: Dispatch):
        self.dispatch = dispatch

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        finished = self.dispatch.result(_job_id(job_id), req.context.body, worker=req.context.identity.actor)
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
        ident = _job_id(job_id)
        identity = req.context.identity
        if identity.role == WORKER:
            self.dispatch.check_worker_reads_job(identity.actor, ident)
        resp.media = representations.job(self.dispatch.job(ident))


class Cancel:
    operations = {
        "POST": Operation(
            "Cancel a queued or running job (its worker's next heartbeat says cancel); 409 for a finished one",
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
            _job_id(job_id), actor=req.context.identity.actor, reason=req.context.body.get("reason")
        )
        resp.media = representations.job(row)


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
    ]
