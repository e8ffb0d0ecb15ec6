"""The output gate's rules of the worker boundary, beside the schema (`svc.worker-output/v0`) and the job's ticket and
role (`domain/dispatch/jobs.py`'s `Dispatch.gate` calls them): a worker's output is assumed hostile (its coding agent
may have been prompt-injected by the very issue it read), so what it may ask of the forge is bound before the
service writes anything with its own token.

- The branch is bound to the job's ticket: `<prefix><ticket key>` or `<prefix><ticket key>/<more>` (the key in any
  case; the prefix is `SVC_WORKER_BRANCH_PREFIX`, `svc/` by default), a valid git branch name as `git
  check-ref-format --branch` has it, and at most `BRANCH_BYTES_MAX` bytes. Job 66 could otherwise hand back the branch
  of job 65's pull request, and the service would take that pull request for job 66's.
- The pull request is a draft: `pull_request.draft`, when present, is `true`. The service opens drafts only; a
  person makes one ready.

Each rule broken is one violation, located by its JSON pointer; the gate refuses the output (422, the job failed,
nothing written to the forge) when there is any.
"""

from __future__ import annotations

import re
from typing import Any

from contracts import Violation

BRANCH_BYTES_MAX = 200
# What `git check-ref-format` refuses anywhere in a name: ASCII control characters and DEL, space, and ~ ^ : ? * [ \.
_NOT_IN_A_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def violations(output: Any, *, ticket: str, prefix: str) -> list[Violation]:
    """Every way `output` (a worker's output, any JSON) breaks the boundary's rules for a job of `ticket`."""
    if not isinstance(output, dict):
        return []
    found: list[Violation] = []
    branch = output.get("branch")
    if isinstance(branch, str):
        found.extend(Violation("/branch", problem) for problem in branch_problems(branch, ticket=ticket, prefix=prefix))
    asked = output.get("pull_request")
    if isinstance(asked, dict) and "draft" in asked and asked["draft"] is not True:
        found.append(Violation("/pull_request/draft", "the service opens draft pull requests only: draft must be true"))
    return found


def branch_problems(branch: str, *, ticket: str, prefix: str) -> list[str]:
    """Why `branch` cannot be the branch of a job for `ticket` (empty when it can): bound to the ticket, a valid git
    branch name, short enough."""
    problems = []
    expected = f"{prefix}{ticket}"
    if not bound_to(branch, ticket=ticket, prefix=prefix):
        problems.append(
            f"a branch of a job for {ticket} is {expected} or {expected}/<more> (the key in any case; "
            "SVC_WORKER_BRANCH_PREFIX is the prefix)"
        )
    problems.extend(git_branch_problems(branch))
    size = len(branch.encode("utf-8", "surrogatepass"))
    if size > BRANCH_BYTES_MAX:
        problems.append(f"the branch is {size} bytes long; at most {BRANCH_BYTES_MAX}")
    return problems


def bound_to(branch: str, *, ticket: str, prefix: str) -> bool:
    """Whether `branch` is `<prefix><ticket>` or `<prefix><ticket>/<more>`, the key in any (ASCII) case: "ﬀ-1" is
    not "FF-1", although `str.upper` makes it so."""
    if not branch.startswith(prefix):
        return False
    rest = branch[len(prefix) :]
    key = rest[: len(ticket)]
    return key.isascii() and key.upper() == ticket.upper() and rest[len(ticket) : len(ticket) + 1] in ("", "/")


def git_branch_problems(name: str) -> list[str]:
    """Why `name` is not a valid git branch name, by the rules of `git check-ref-format --branch` (empty when it
    is)."""
    if name == "":
        return ["a branch name cannot be empty"]
    problems = []
    bad = _NOT_IN_A_REF.search(name)
    if bad is not None:
        problems.append(
            f"a branch name cannot hold {_shown(bad.group())} (no control character, space, ~ ^ : ? * [ or \\)"
        )
    if ".." in name:
        problems.append("a branch name cannot hold '..'")
    if "//" in name:
        problems.append("a branch name cannot hold '//'")
    if "@{" in name:
        problems.append("a branch name cannot hold '@{'")
    if name == "@":
        problems.append("a branch name cannot be '@'")
    if name.startswith("-"):
        problems.append("a branch name cannot start with '-'")
    if name.startswith("/") or name.endswith("/"):
        problems.append("a branch name cannot start or end with '/'")
    if name.endswith("."):
        problems.append("a branch name cannot end with '.'")
    for component in name.split("/"):
        if component.startswith("."):
            problems.append(f"no part of a branch name can start with '.' ({component!r})")
        if component.endswith(".lock"):
            problems.append(f"no part of a branch name can end with '.lock' ({component!r})")
    return problems


def _shown(char: str) -> str:
    return repr(char) if char.isprintable() and char != " " else f"U+{ord(char):04X}"
