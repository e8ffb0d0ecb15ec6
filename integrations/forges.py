"""One interface for the two forges the service writes to (GitHub: `integrations/github.py`, GitLab:
`integrations/gitlab.py`), as healthchecks' transports share one `notify`: the caller holds a `Forge` and never asks
which one it is.

What the loop needs of a forge, and nothing more:
- `open_draft(repo, branch=, title=, body=)`: the open pull (merge) request of `branch`, or a new draft one (never
  two for one branch); GitLab's draft is its `Draft: ` title.
- `find_open(repo, branch)`: the open one of `branch`, or None.
- `comment(repo, number, body)`: a comment (GitLab: a note) on it; its address.
- `own_login()`: the account the token is (`GET /user`: GitHub's `login`, GitLab's `username`), which tells the
  service's own forge events from the team's.

`adapters(...)` builds one of each forge that has a token, once (the composition root does); `web_url` says where a
person finds a pull request of either, from its API's address. Failures are `TransportError`s, as every target's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from integrations.github import GitHub
from integrations.gitlab import GitLab

GITHUB, GITLAB = "github", "gitlab"
FORGES = (GITHUB, GITLAB)


@dataclass(frozen=True)
class ChangeRequest:
    """A pull request (GitLab: merge request) the forge has: its number (GitLab: iid) and its address; `created` is
    False when an open one for that branch existed already and is returned instead."""

    number: int
    url: str
    created: bool
    body: str = field(default="", compare=False)  # what it says: the service knows its own by the footer it wrote


class Forge(Protocol):
    name: str

    def open_draft(self, repo: str, *, branch: str, title: str, body: str) -> ChangeRequest: ...

    def find_open(self, repo: str, branch: str) -> ChangeRequest | None: ...

    def comment(self, repo: str, number: int, body: str) -> str: ...

    def own_login(self) -> str: ...

    def close(self) -> None: ...


class GitHubForge:
    """GitHub behind the one interface."""

    name = GITHUB

    def __init__(self, api_url: str, token: str, *, tries: int = 1):
        # One try a call: the outbox retries a write, across restarts, with its own backoff.
        self.client = GitHub(api_url, token, tries=tries)

    def open_draft(self, repo: str, *, branch: str, title: str, body: str) -> ChangeRequest:
        made = self.client.draft_pull_request(repo, branch=branch, title=title, body=body, draft=True)
        return ChangeRequest(made.number, made.html_url, made.created, made.body)

    def find_open(self, repo: str, branch: str) -> ChangeRequest | None:
        found = self.client.open_pull_request(repo, branch)
        return ChangeRequest(found.number, found.html_url, False, found.body) if found is not None else None

    def comment(self, repo: str, number: int, body: str) -> str:
        return self.client.comment(repo, number, body)

    def own_login(self) -> str:
        return self.client.own_login()

    def close(self) -> None:
        self.client.session.close()


class GitLabForge:
    """GitLab behind the one interface."""

    name = GITLAB

    def __init__(self, api_url: str, token: str, *, tries: int = 1):
        self.client = GitLab(api_url, token, tries=tries)

    def open_draft(self, repo: str, *, branch: str, title: str, body: str) -> ChangeRequest:
        made = self.client.draft_merge_request(repo, branch=branch, title=title, body=body, draft=True)
        return ChangeRequest(made.iid, made.web_url, made.created, made.description)

    def find_open(self, repo: str, branch: str) -> ChangeRequest | None:
        found = self.client.open_merge_request(repo, branch)
        return ChangeRequest(found.iid, found.web_url, False, found.description) if found is not None else None

    def comment(self, repo: str, number: int, body: str) -> str:
        return self.client.note(repo, number, body)

    def own_login(self) -> str:
        return self.client.own_login()

    def close(self) -> None:
        self.client.session.close()


def adapters(
    *, github_api_url: str, github_token: str | None, gitlab_api_url: str, gitlab_token: str | None
) -> dict[str, Forge]:
    """One adapter for each forge that has a token, by name (`github`, `gitlab`)."""
    found: dict[str, Forge] = {}
    if github_token:
        found[GITHUB] = GitHubForge(github_api_url, github_token)
    if gitlab_token:
        found[GITLAB] = GitLabForge(gitlab_api_url, gitlab_token)
    return found


def web_url(forge: str, api_url: str, repo: str, number: int) -> str:
    """Where a person finds pull request `number` of `repo` (GitLab: merge request), from the forge's API address:
    GitHub's `api.github.com` serves `github.com`, GitHub Enterprise's `HOST/api/v3` serves `HOST`, GitLab's
    `HOST/api/v4` serves `HOST`."""
    parts = urlsplit(api_url.rstrip("/"))
    host, path = parts.netloc, parts.path
    if forge == GITHUB:
        host = "github.com" if host == "api.github.com" else host
        path = path.removesuffix("/api/v3")
        return f"{parts.scheme}://{host}{path}/{repo}/pull/{int(number)}"
    return f"{parts.scheme}://{host}{path.removesuffix('/api/v4')}/{repo}/-/merge_requests/{int(number)}"
