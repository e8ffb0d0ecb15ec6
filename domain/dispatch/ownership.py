"""Whose is the open pull request on a job's branch: the forge write of a job finds one open there before it opens
its own (a retry after a crash, a fixer's job on its ticket's branch), and writes on it only when the service opened
it for this ticket. Any other (a person's, another ticket's, one a worker's branch was aimed at) fails the write,
naming it, and nothing is written: job 66 must never take job 65's pull request for its own.

The service knows its own by the address it recorded on one of the ticket's jobs (`forge.pull_request`), or by the
footer it wrote at the end of the body (`neutralize.footer`: it names the ticket and the job), which is there even when
the recording was lost (a crash between the forge's answer and the record).
"""

from __future__ import annotations

import re

from storage import jobs as rows


def foreign(*, ticket: str, url: str, body: str, kind: str = "pull request") -> str | None:
    """Why the open pull request at `url` (saying `body`) is not one the service opened for `ticket`, naming it; None
    when it is the service's own for `ticket`. Reads the ticket's jobs (inside the caller's connection)."""
    if url in rows.pull_requests_of(ticket):
        return None
    said = _footer(body)
    if said is not None and said == ticket:
        return None
    whose = f"one the service opened for {said}" if said is not None else "not opened by the service"
    return (
        f"the branch already has an open {kind}, {url}, {whose}, not for {ticket}: nothing was written "
        "(close it, or have the worker use another branch of the ticket)"
    )


# The footer's line naming the ticket and the job (the last such line: the worker's text comes before it).
_SIGNATURE = re.compile(r"^Opened by svc for ([A-Z][A-Z0-9]*-[A-Z0-9]+), job [0-9]+ \(", re.M)
_REFS = re.compile(r"^Refs ([A-Z][A-Z0-9]*-[A-Z0-9]+)$", re.M)


def _footer(body: str) -> str | None:
    """The ticket the service's own footer at the end of `body` names, or None when it has none."""
    lines = body.rstrip().split("\n")
    tail = "\n".join(lines[-3:])
    signed, refs = _SIGNATURE.findall(tail), _REFS.findall(tail)
    if tail.startswith("---\n") and signed and refs and signed[-1] == refs[-1]:
        return signed[-1]
    return None
