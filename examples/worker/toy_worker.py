"""A toy COMMAND for `svc worker` (clients/worker.py): it reads the claimed job on its standard input and writes, on
its standard output, the `svc.worker-output/v0` document a real coding agent would hand back after pushing its
work: `changes_ready` for the job's ticket and role, on branch `svc/<ticket in lower case>`, one commit, the files
it touched and the pull request's title and body. It changes nothing anywhere: the sha is made up (40 hex digits
drawn from the job), and the branch is not pushed. A real COMMAND does the work, pushes the branch with its own
deploy key, and answers the same shape; the service, not the worker, then opens the draft pull request.

    .venv/bin/svc worker --bay bay-1 -- python examples/worker/toy_worker.py

Standard library only. Exit 0 with the document; 2 when its input is not a job.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any


def output_for(job: dict[str, Any]) -> dict[str, Any]:
    """The worker output for `job` (the claim's `job` object: its `ticket` is the ticket, `role` the role)."""
    ticket = job["ticket"]["key"] if isinstance(job.get("ticket"), dict) else str(job["ticket"])
    role = job.get("role") or "coder"
    title = job["ticket"].get("title") if isinstance(job.get("ticket"), dict) else None
    sha = hashlib.sha1(json.dumps([job.get("id"), ticket, role]).encode()).hexdigest()  # noqa: S324 (not security)
    document: dict[str, Any] = {
        "schema": "svc.worker-output/v0",
        "ticket": ticket,
        "role": role,
        "status": "changes_ready",
        "summary": f"Toy {role} for {ticket}: a one-line change to show the round trip.",
        "branch": f"svc/{ticket.lower()}",
        "commits": [{"sha": sha, "message": f"{ticket}: toy change by the reference worker"}],
        "files_changed": ["README.md"],
        "pull_request": {
            "title": f"{ticket}: {title or 'toy change'}",
            "body": f"Made by the toy worker for job {job.get('id')} ({role}).",
            "draft": True,
        },
    }
    if isinstance(job.get("event_id"), str) and job["event_id"]:
        document["event_id"] = job["event_id"]
    return document


def main() -> int:
    try:
        job = json.load(sys.stdin)
        document = output_for(job)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        print(f"toy_worker: the input is not a job ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
