"""Each ticket's pull request (`domain/dispatch/pull_requests.py` follows them): found by its ticket, by its forge
number, or by the commit a pipeline ran on (its latest head, or its merge commit)."""

from __future__ import annotations

from datetime import datetime

from storage import statements
from storage.models import PullRequest, PullRequestRecord

__all__ = ["PullRequestRecord"]

OPEN, MERGED, CLOSED = "open", "merged", "closed"


def of_ticket(key: str, *, for_update: bool = False) -> PullRequestRecord | None:
    return statements.select_one(PullRequest, {"ticket": key}, for_update=for_update)


def by_number(repo: str, number: int) -> PullRequestRecord | None:
    """The pull request `number` of `repo`, if a ticket follows it."""
    found = statements.rows(
        PullRequest,
        ("by_number",),
        lambda p: f'WHERE "repo" = {p} AND "number" = {p} LIMIT 1',
        [repo, number],
    )
    return found[0] if found else None


def by_head(sha: str) -> PullRequestRecord | None:
    """The open pull request whose latest head is `sha`."""
    found = statements.rows(
        PullRequest, ("by_head",), lambda p: f'WHERE "head_sha" = {p} AND "state" = {p} LIMIT 1', [sha, OPEN]
    )
    return found[0] if found else None


def by_merge_commit(sha: str) -> PullRequestRecord | None:
    """The merged pull request whose merge commit is `sha`."""
    found = statements.rows(
        PullRequest,
        ("by_merge_commit",),
        lambda p: f'WHERE "merge_commit_sha" = {p} AND "state" = {p} LIMIT 1',
        [sha, MERGED],
    )
    return found[0] if found else None


def put(
    key: str,
    *,
    forge: str,
    repo: str | None,
    number: int | None,
    url: str | None,
    branch: str | None,
    head_sha: str | None,
    job_id: int | None,
    at: datetime,
) -> PullRequestRecord:
    """The ticket's pull request is this one, open (replacing any it had before)."""
    PullRequest.delete().where(PullRequest.ticket == key).execute()
    return statements.insert(
        PullRequest,
        {
            "ticket": key,
            "forge": forge,
            "repo": repo,
            "number": number,
            "url": url,
            "branch": branch,
            "state": OPEN,
            "head_sha": head_sha,
            "merge_commit_sha": None,
            "job_id": job_id,
            "green_at": None,
            "updated_at": at,
        },
    )


def change(key: str, changes: dict[str, object], *, at: datetime) -> None:
    """Change the ticket's pull request (its state, its latest head, ...)."""
    statements.update(PullRequest, {**changes, "updated_at": at}, {"ticket": key})
