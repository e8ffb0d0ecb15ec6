"""Local HTTP servers shaped like GitHub's webhook deliveries API and GitLab's project hook events API.

Each keeps, per hook, the log its sender keeps (every attempt to deliver an event, with what it got) and the
request it sent, so that asked to deliver again it POSTs the very same body and headers to the service, as the
real sender does: GitHub the signed body with its `X-GitHub-Delivery` (the guid) and `X-Hub-Signature-256`;
GitLab its body with `X-Gitlab-Token`, the same `Idempotency-Key` and `X-Gitlab-Event-UUID`.

- `FakeGitHub`: `GET /{hook}/deliveries?per_page=&cursor=` newest first, the next page's cursor in a `Link: <…>;
  rel="next"` header; records `{id, guid, delivered_at, redelivery, duplicate, duration, status, status_code,
  event, action, installation_id, repository_id, throttled_at}`; `POST /{hook}/deliveries/{id}/attempts` → 202.
  `Authorization: Bearer <token>`: none or a wrong one 401, a token without the hook's permission 403 ("Resource
  not accessible by personal access token"), an unknown hook 404, a cursor it did not make 400.
- `FakeGitLab`: `GET /api/v4/{hook}/events?status=&per_page=&page=` newest first, `X-Next-Page` (empty on the
  last page), `X-Page`, `X-Per-Page`, `X-Total`, `X-Total-Pages`; records `{id, url, trigger, request_headers
  (the token redacted), request_data, response_headers, response_body, execution_duration, response_status}`;
  `POST .../events/{id}/resend` → 201 `{"response_status": ...}`, at most five a minute per hook (then 429 with
  `Retry-After`). `PRIVATE-TOKEN`: 401, 403 and 404 as GitLab answers them.

Both can script their next answers (`answer_next`), hold every answer (`hold`, a slow sender), and put a malformed
record on a page (`malformed`). Both answer `GET /user` (`/api/v4/user`) with the token's own user (`svc-bot`).

As strict as the forges (a kind fake hides the bugs that matter; the published descriptions are the referee, see
`tests/conformance/`):
- `FakeGitLab` refuses a hook events `per_page` outside 1..20, a `page` below 1 and a `status` GitLab does not
  declare with 400 `{"error": "per_page does not have a valid value"}` (GitLab's own words), a merge request list's
  `state` outside its values likewise, and a merge request title over 255 characters with 400 `{"message": {"title":
  ["is too long (maximum is 255 characters)"]}}`. Its resend limit counts per project (the hook's parent) and user,
  as GitLab's code does, and its 429 carries `Retry-After` and `RateLimit-Reset`.
- `FakeGitHub` refuses a pull request title over 256 characters and a comment body over 65536 (422, GitHub's
  words), a `draft` to a repository without draft support (`add_repo(..., drafts=False)`: 422 "Draft pull requests
  are not supported in this repository."), and, for a repository whose branches it was told
  (`add_repo(..., branches={"main", ...})`), a head never pushed (422, `errors: [{"field": "head", "code":
  "invalid"}]`). `secondary_rate_limit(times=1)` answers GitHub's secondary rate limit: 403, its message, no
  `retry-after`, requests still remaining. `rename_repo(old, new)` makes the old name answer 301 (307 for a write) to
  `/repositories/{id}/...`, as GitHub answers for a renamed repository.

The forge writes (CONTRACT.md, "The forge writes"), answered in the shapes GitHub's and GitLab's REST docs publish,
and kept so that a test can count what was written:
- `FakeGitHub`: `add_repo("acme/portfolio", default_branch="main")`, then `GET /repos/{o}/{r}` (`default_branch`),
  `GET /repos/{o}/{r}/pulls?head={o}:{branch}&state=open` (newest first), `POST /repos/{o}/{r}/pulls` → 201 (422
  "A pull request already exists for {o}:{branch}." when one is open for that head, as GitHub answers), `POST
  /repos/{o}/{r}/issues/{n}/comments` → 201. `fake.pull_requests(repo, head=branch)` lists what is there (open and
  closed), `fake.comments` every comment; `close_pull(repo, number)` closes one. A write call without `Accept:
  application/vnd.github+json` or `X-GitHub-Api-Version: 2022-11-28` is answered 400 and noted in `header_faults`.
- `FakeGitLab`: `add_project("group/name", project_id=15, default_branch="main")`, then under `/api/v4`: `GET
  /projects/{id}` (the numeric id, or the path URL-encoded as one segment: `group%2Fname`; an unencoded path is
  404, as on GitLab), `GET /projects/{id}/merge_requests?source_branch=&state=opened`, `POST
  /projects/{id}/merge_requests` → 201 (409 "Another open merge request already exists for this source branch: !N"),
  `GET /projects/{id}/merge_requests/{iid}`, `POST .../merge_requests/{iid}/notes` → 201. A merge request is a
  draft when its title starts with `Draft:`, `[Draft]` or `(Draft)`, as GitLab reads it. `fake.merge_requests(project,
  source_branch=branch)` and `fake.notes` show what was written.
- Failures, both: `fail(status, times=1)` answers the next `times` matching calls with `status` (a body shaped like
  the forge's own error), or every matching call for `seconds`; `retry_after=` adds `Retry-After`; `method=` and
  `path=` (a substring of the request's path) narrow what it matches. `fail(500, times=2)`, `fail(429,
  retry_after=1)`, `fail(401)`. `answer_when(status, body, method=, path=)` answers any scripted body so (for a race:
  an empty listing although a pull request is open). Every call is kept in `calls` (`method`, `path`, `headers`,
  `json`: the parsed body or None).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

GITHUB_TOKEN = "ghp_test_0123456789abcdefghijklmnopqrstuvwxyz"
GITLAB_TOKEN = "glpat-test-0123456789abcdefghij"

# Where a fake delivers: given the headers and the body, the receiver's status (0: no answer).
Receiver = Callable[[dict[str, str], bytes], int]


def http_receiver(url: str, *, timeout: float = 10.0) -> Receiver:
    """A `Receiver` that POSTs to `url` over HTTP, as the sender does (no answer: status 0)."""
    import requests

    def post(headers: dict[str, str], body: bytes) -> int:
        try:
            return requests.post(url, data=body, headers=headers, timeout=timeout).status_code
        except requests.RequestException:
            return 0

    return post


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class Sent:
    """What the sender sent for one event: the same on every attempt."""

    headers: dict[str, str]
    body: bytes
    event: str
    action: str | None


@dataclass
class Scripted:
    """An answer given instead of the route's, to the calls it matches: `times` of them, or all until `until`."""

    status: int
    body: Any
    headers: dict[str, str]
    method: str | None
    path: str | None
    times: int | None
    until: float | None

    def matches(self, method: str, path: str, now: float) -> bool:
        if self.method is not None and self.method != method:
            return False
        if self.path is not None and self.path not in path:
            return False
        return self.until is None or now < self.until


@dataclass
class Hook:
    log: list[dict[str, Any]] = field(default_factory=list)  # oldest first
    sent: dict[str, Sent] = field(default_factory=dict)  # by guid / Idempotency-Key


class _FakeForge:
    """What both fakes share: the server, scripted answers, a hold, the hooks and who may read them."""

    def __init__(self, token: str, receiver: Receiver | None, *, clock: Callable[[], datetime] | None = None):
        self.token = token
        self.receiver = receiver
        self.clock = clock or (lambda: datetime.now(UTC))
        self.hooks: dict[str, Hook] = {}
        self.forbidden: set[str] = set()  # hooks the token may not read
        self.calls: list[dict[str, Any]] = []
        self.script: deque[tuple[int, dict[str, str], bytes]] = deque()
        self.scripted: list[Scripted] = []
        self.monotonic: Callable[[], float] = time.monotonic
        self.malformed: dict[str, dict[str, Any] | str] = {}  # hook -> a record put first on its first page
        self.bad_cursor = False  # the next-page links carry a cursor the API itself then refuses
        self.hold = threading.Event()
        self.hold.set()
        self.ids = itertools.count(1000)
        self.lock = threading.RLock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                fake.hold.wait(timeout=30)
                status, headers, body = fake.answer(method, self.path, dict(self.headers), raw)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._answer("GET")

            def do_POST(self):
                self._answer("POST")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer_next(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode() if body is not None else b""
        self.script.append((status, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}, payload))

    def hook(self, path: str) -> Hook:
        return self.hooks.setdefault(path, Hook())

    def deliver(self, hook: str, guid: str) -> int:
        """One attempt to deliver the event `guid` of `hook` to the receiver; logged with what it got."""
        sent = self.hook(hook).sent[guid]
        status = self.receiver(dict(sent.headers), sent.body) if self.receiver is not None else 0
        self.log_attempt(hook, guid, status)
        return status

    def answer(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.calls.append({"method": method, "path": path, "headers": headers, "json": _parsed(raw)})
            if self.script:
                return self.script.popleft()
            now = self.monotonic()
            for scripted in self.scripted:
                if scripted.matches(method, path, now):
                    if scripted.times is not None:
                        scripted.times -= 1
                        if scripted.times <= 0:
                            self.scripted.remove(scripted)
                    return self._json(scripted.status, scripted.body, scripted.headers)
            self.scripted = [s for s in self.scripted if s.until is None or now < s.until]
        return self.route(method, path, headers, raw)

    def answer_when(
        self,
        status: int,
        body: Any,
        *,
        times: int | None = 1,
        seconds: float | None = None,
        method: str | None = None,
        path: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer the next `times` calls that match `method` and `path` (a substring), or all of them for `seconds`,
        with `status` and `body` instead of what the fake would answer."""
        until = self.monotonic() + seconds if seconds is not None else None
        with self.lock:
            self.scripted.append(
                Scripted(status, body, dict(headers or {}), method, path, None if seconds is not None else times, until)
            )

    def fail(
        self,
        status: int,
        *,
        times: int = 1,
        seconds: float | None = None,
        retry_after: float | None = None,
        method: str | None = None,
        path: str | None = None,
    ) -> None:
        """Fail the next `times` matching calls (or every one for `seconds`) with `status`, its body the forge's own
        words for it; `retry_after` adds the header (429, 503)."""
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        self.answer_when(
            status, self.error_body(status), times=times, seconds=seconds, method=method, path=path, headers=headers
        )

    def error_body(self, status: int) -> Any:
        return {"message": f"{status} {HTTPStatus(status).phrase}"}

    def written(self) -> list[dict[str, Any]]:
        """Every write call (POST) the fake got, in order, with its parsed body: what reached the forge."""
        return [c for c in self.calls if c["method"] == "POST"]

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None):
        return status, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}, json.dumps(body).encode()

    def asked_again(self) -> list[str]:
        """The paths of every request that asked for a delivery again, in order."""
        return [c["path"] for c in self.calls if c["method"] == "POST" and c["path"].endswith(("/attempts", "/resend"))]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


class FakeGitHub(_FakeForge):
    def __init__(self, receiver: Receiver | None = None, *, token: str = GITHUB_TOKEN, clock=None):
        super().__init__(token, receiver, clock=clock)
        self.repos: dict[str, dict[str, Any]] = {}
        self.pulls: dict[str, list[dict[str, Any]]] = {}  # repo -> its pull requests, oldest first
        self.comments: list[dict[str, Any]] = []  # every comment written, each with its "repo" and "number"
        self.header_faults: list[str] = []
        self.numbers: dict[str, itertools.count] = {}
        self.renamed: dict[str, str] = {}  # old "owner/name" -> the name it has now

    def add_repo(
        self, repo: str, *, default_branch: str = "main", drafts: bool = True, branches: set[str] | None = None
    ) -> FakeGitHub:
        """A repository the token may write to ("owner/name"); `drafts=False`: one without draft pull requests (a
        private repository on GitHub Free); `branches`: the branches pushed to it (None: any head is taken)."""
        with self.lock:
            self.repos[repo] = {
                "id": next(self.ids),
                "default_branch": default_branch,
                "drafts": drafts,
                "branches": None if branches is None else {default_branch, *branches},
            }
            self.pulls.setdefault(repo, [])
            self.numbers.setdefault(repo, itertools.count(1))
        return self

    def push(self, repo: str, branch: str) -> None:
        """`branch` is pushed to `repo` now (a worker pushed it after the repository was made)."""
        with self.lock:
            if self.repos[repo]["branches"] is not None:
                self.repos[repo]["branches"].add(branch)

    def rename_repo(self, old: str, new: str) -> None:
        """The repository `old` is now `new`: its pull requests go with it, and the old name answers 301/307."""
        with self.lock:
            self.repos[new] = self.repos.pop(old)
            self.pulls[new] = self.pulls.pop(old)
            self.numbers[new] = self.numbers.pop(old)
            self.renamed[old] = new

    def secondary_rate_limit(self, *, times: int = 1, retry_after: float | None = None, **match: Any) -> None:
        """Answer the next `times` matching calls as GitHub's secondary rate limit does: 403, its message, requests
        still remaining and, unless `retry_after` is given, no word of when (its docs: wait at least a minute)."""
        headers = {
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": "4987",
            "x-ratelimit-used": "13",
            "x-ratelimit-reset": str(int(time.time()) + 3600),
            "x-ratelimit-resource": "core",
        }
        if retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
        body = {
            "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If "
            "you reach out to GitHub Support for help, please include the request ID 0F3A:1B2C:3D4E5F:6A7B8C:9D0E1F2A.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
            "#about-secondary-rate-limits",
        }
        self.answer_when(403, body, times=times, headers=headers, **match)

    def pull_requests(self, repo: str, *, head: str | None = None, state: str | None = None) -> list[dict[str, Any]]:
        """The pull requests of `repo` (of branch `head`, in `state`), oldest first."""
        with self.lock:
            return [
                p
                for p in self.pulls.get(repo, [])
                if (head is None or p["head"]["ref"] == head) and (state is None or p["state"] == state)
            ]

    def close_pull(self, repo: str, number: int) -> None:
        with self.lock:
            for pull in self.pulls[repo]:
                if pull["number"] == number:
                    pull["state"], pull["closed_at"] = "closed", _stamp(self.clock())

    def error_body(self, status: int) -> Any:
        words = {401: "Bad credentials", 403: "Resource not accessible by personal access token", 404: "Not Found"}
        body: dict[str, Any] = {"message": words.get(status, HTTPStatus(status).phrase)}
        if status == 422:
            body = {"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "invalid"}]}
        return {**body, "documentation_url": "https://docs.github.com/rest", "status": str(status)}

    @property
    def url(self) -> str:
        return self.base

    def send(self, hook: str, event: str, action: str | None, headers: dict[str, str], body: bytes) -> int:
        """GitHub sends a new event (its headers name its guid): one attempt, logged."""
        guid = headers["X-GitHub-Delivery"]
        self.hook(hook).sent[guid] = Sent(dict(headers), body, event, action)
        return self.deliver(hook, guid)

    def log_attempt(self, hook: str, guid: str, status: int, *, redelivery: bool | None = None, at=None) -> dict:
        with self.lock:
            log = self.hook(hook).log
            sent = self.hook(hook).sent.get(guid)
            record = {
                "id": next(self.ids),
                "guid": guid,
                "delivered_at": _stamp(at or self.clock()),
                "redelivery": any(r["guid"] == guid for r in log) if redelivery is None else redelivery,
                "duplicate": False,
                "duration": 0.12,
                "status": "OK" if 200 <= status < 300 else ("Timed out" if status == 0 else "Invalid HTTP Response"),
                "status_code": status,
                "event": sent.event if sent else "pull_request",
                "action": sent.action if sent else None,
                "installation_id": None,
                "repository_id": 35129377,
                "throttled_at": None,
            }
            log.append(record)
            return record

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes):
        parts = urlsplit(path)
        if headers.get("Authorization") != f"Bearer {self.token}":
            return self._json(401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
        route = parts.path.strip("/")
        segments = route.split("/")
        if method == "GET" and route == "user":
            return self._json(200, {"login": "svc-bot", "id": 7, "node_id": "U_7", "type": "User", "site_admin": False})
        if segments[0] == "repositories" and len(segments) >= 2:  # where a renamed repository's old name points
            named = next((r for r, v in self.repos.items() if str(v["id"]) == segments[1]), None)
            segments = ["repos", *(named or "?/?").split("/"), *segments[2:]]
            route = "/".join(segments)
        elif segments[0] == "repos" and len(segments) >= 3 and "/".join(segments[1:3]) in self.renamed:
            moved = self.repos[self.renamed["/".join(segments[1:3])]]["id"]
            rest = "/".join(segments[3:])
            location = f"{self.base}/repositories/{moved}" + (f"/{rest}" if rest else "")
            location += f"?{parts.query}" if parts.query else ""
            body = {
                "message": "Moved Permanently",
                "url": location,
                "documentation_url": "https://docs.github.com/rest",
            }
            return self._json(301 if method == "GET" else 307, body, {"Location": location})
        if segments[0] == "repos" and len(segments) >= 3 and "hooks" not in segments:
            return self._write(method, segments, parse_qs(parts.query), headers, raw)
        if method == "GET" and route.endswith("/deliveries"):
            return self._list(route.removesuffix("/deliveries"), parse_qs(parts.query))
        if method == "POST" and route.endswith("/attempts"):
            hook, _, rest = route.rpartition("/deliveries/")
            return self._redeliver(hook, rest.removesuffix("/attempts"))
        return self._json(404, {"message": "Not Found"})

    # -- the forge writes: repositories, pull requests, comments ----------------------------------------

    def _write(self, method: str, segments: list[str], query: dict[str, list[str]], headers: dict[str, str], raw):
        for name, wanted in (("Accept", "application/vnd.github+json"), ("X-GitHub-Api-Version", "2022-11-28")):
            if headers.get(name) != wanted:
                self.header_faults.append(f"{method} /{'/'.join(segments)}: {name}={headers.get(name)!r}")
                return self._json(400, {"message": f"fake GitHub: {name} must be {wanted}"})
        repo = "/".join(segments[1:3])
        if repo not in self.repos:
            return self._json(404, self.error_body(404))
        if repo in self.forbidden and method == "POST":
            return self._json(403, self.error_body(403))
        rest = segments[3:]
        if method == "GET" and rest == []:
            return self._json(200, self._repository(repo))
        if rest == ["pulls"] and method == "GET":
            return self._list_pulls(repo, query)
        if rest == ["pulls"] and method == "POST":
            return self._create_pull(repo, _parsed(raw))
        if len(rest) == 3 and rest[0] == "issues" and rest[2] == "comments" and method == "POST":
            return self._comment(repo, rest[1], _parsed(raw))
        return self._json(404, self.error_body(404))

    def _repository(self, repo: str) -> dict[str, Any]:
        owner, name = repo.split("/")
        return {
            "id": self.repos[repo]["id"],
            "node_id": f"R_{self.repos[repo]['id']}",
            "name": name,
            "full_name": repo,
            "private": True,
            "owner": {"login": owner, "id": 1, "type": "Organization"},
            "html_url": f"https://github.com/{repo}",
            "url": f"{self.base}/repos/{repo}",
            "default_branch": self.repos[repo]["default_branch"],
            "visibility": "private",
        }

    def _list_pulls(self, repo: str, query: dict[str, list[str]]):
        state = (query.get("state") or ["open"])[0]
        head = (query.get("head") or [None])[0]
        with self.lock:
            pulls = [
                p
                for p in reversed(self.pulls[repo])
                if (state == "all" or p["state"] == state) and (head is None or p["head"]["label"] == head)
            ]
        return self._json(200, pulls)

    def _create_pull(self, repo: str, body: Any):
        if not isinstance(body, dict):
            return self._json(400, {"message": "Problems parsing JSON"})
        missing = [f for f in ("title", "head", "base") if not isinstance(body.get(f), str) or not body[f]]
        if missing:
            errors = [{"resource": "PullRequest", "field": f, "code": "missing_field"} for f in missing]
            return self._json(422, {"message": "Validation Failed", "errors": errors})
        owner = repo.split("/")[0]
        head, base = body["head"], body["base"]
        if base != self.repos[repo]["default_branch"]:
            errors = [{"resource": "PullRequest", "field": "base", "code": "invalid"}]
            return self._json(422, {"message": "Validation Failed", "errors": errors})
        pushed = self.repos[repo]["branches"]
        if pushed is not None and head not in pushed:
            errors = [{"resource": "PullRequest", "field": "head", "code": "invalid"}]
            return self._json(422, {"message": "Validation Failed", "errors": errors})
        if len(body["title"]) > 256:
            message = "title is too long (maximum is 256 characters)"
            errors = [{"resource": "PullRequest", "field": "title", "code": "custom", "message": message}]
            return self._json(422, {"message": "Validation Failed", "errors": errors})
        if body.get("draft") is True and not self.repos[repo]["drafts"]:
            docs = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
            message = "Draft pull requests are not supported in this repository."
            return self._json(422, {"message": message, "documentation_url": docs})
        with self.lock:
            if self.pull_requests(repo, head=head, state="open"):
                error = {"resource": "PullRequest", "code": "custom"}
                error["message"] = f"A pull request already exists for {owner}:{head}."
                return self._json(422, {"message": "Validation Failed", "errors": [error]})
            number = next(self.numbers[repo])
            stamp = _stamp(self.clock())
            sha = uuid.uuid4().hex + uuid.uuid4().hex[:8]
            pull = {
                "url": f"{self.base}/repos/{repo}/pulls/{number}",
                "id": next(self.ids),
                "node_id": f"PR_{number}",
                "html_url": f"https://github.com/{repo}/pull/{number}",
                "issue_url": f"{self.base}/repos/{repo}/issues/{number}",
                "comments_url": f"{self.base}/repos/{repo}/issues/{number}/comments",
                "number": number,
                "state": "open",
                "locked": False,
                "title": body["title"],
                "body": body.get("body"),
                "user": {"login": "svc-bot", "id": 7, "type": "Bot"},
                "draft": body.get("draft") is True,
                "head": {"label": f"{owner}:{head}", "ref": head, "sha": sha, "repo": self._repository(repo)},
                "base": {"label": f"{owner}:{base}", "ref": base, "sha": sha[::-1], "repo": self._repository(repo)},
                "created_at": stamp,
                "updated_at": stamp,
                "closed_at": None,
                "merged_at": None,
                "merge_commit_sha": None,
                "author_association": "NONE",
            }
            self.pulls[repo].append(pull)
        return self._json(201, pull, {"Location": pull["url"]})

    def _comment(self, repo: str, number: str, body: Any):
        with self.lock:
            if not number.isdigit() or not any(p["number"] == int(number) for p in self.pulls[repo]):
                return self._json(404, self.error_body(404))
        if not isinstance(body, dict) or not isinstance(body.get("body"), str) or not body["body"]:
            errors = [{"resource": "IssueComment", "field": "body", "code": "missing_field"}]
            return self._json(422, {"message": "Validation Failed", "errors": errors})
        if len(body["body"]) > 65536:
            message = "body is too long (maximum is 65536 characters)"
            errors = [{"resource": "IssueComment", "field": "body", "code": "custom", "message": message}]
            return self._json(422, {"message": "Validation Failed", "errors": errors})
        ident, stamp = next(self.ids), _stamp(self.clock())
        comment = {
            "id": ident,
            "node_id": f"IC_{ident}",
            "url": f"{self.base}/repos/{repo}/issues/comments/{ident}",
            "html_url": f"https://github.com/{repo}/pull/{number}#issuecomment-{ident}",
            "body": body["body"],
            "user": {"login": "svc-bot", "id": 7, "type": "Bot"},
            "created_at": stamp,
            "updated_at": stamp,
            "issue_url": f"{self.base}/repos/{repo}/issues/{number}",
            "author_association": "NONE",
        }
        with self.lock:
            self.comments.append({**comment, "repo": repo, "number": int(number)})
        return self._json(201, comment)

    # -- webhook deliveries -------------------------------------------------------------------------------

    def _refusal(self, hook: str):
        if hook not in self.hooks:
            return self._json(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
        if hook in self.forbidden:
            return self._json(403, {"message": "Resource not accessible by personal access token"})
        return None

    def _list(self, hook: str, query: dict[str, list[str]]):
        refused = self._refusal(hook)
        if refused:
            return refused
        per_page = min(int((query.get("per_page") or ["30"])[0]), 100)
        with self.lock:
            newest_first = list(reversed(self.hook(hook).log))
        start = 0
        if "cursor" in query:
            cursor = query["cursor"][0]
            if not cursor.startswith("v1_") or not cursor[3:].isdigit():
                return self._json(400, {"message": "Bad Request", "errors": ["cursor is invalid"]})
            start = int(cursor[3:])
        page: list[Any] = newest_first[start : start + per_page]
        if start == 0 and hook in self.malformed:
            page = [self.malformed[hook], *page]
        headers = {}
        if start + per_page < len(newest_first):
            cursor = "garbled" if self.bad_cursor else f"v1_{start + per_page}"
            following = f"{self.base}/{hook}/deliveries?per_page={per_page}&cursor={cursor}"
            headers["Link"] = f'<{following}>; rel="next"'
        return self._json(200, page, headers)

    def _redeliver(self, hook: str, delivery: str):
        refused = self._refusal(hook)
        if refused:
            return refused
        with self.lock:
            record = next((r for r in self.hook(hook).log if str(r["id"]) == delivery), None)
        if record is None:
            return self._json(404, {"message": "Not Found"})
        # GitHub answers 202 and delivers soon after; here before the answer, so a test sees it when the call ends.
        self.deliver(hook, record["guid"])
        return self._json(202, {})


class FakeGitLab(_FakeForge):
    def __init__(
        self,
        receiver: Receiver | None = None,
        *,
        token: str = GITLAB_TOKEN,
        clock=None,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        super().__init__(token, receiver, clock=clock)
        self.monotonic = monotonic
        self.resends: dict[str, deque[float]] = {}
        self.projects: dict[str, dict[str, Any]] = {}  # path -> {"id", "default_branch"}
        self.mrs: dict[str, list[dict[str, Any]]] = {}  # path -> its merge requests, oldest first
        self.notes: list[dict[str, Any]] = []  # every note written, each with its "project" (path) and "iid"

    def add_project(
        self, path: str, *, project_id: int | None = None, default_branch: str | None = "main"
    ) -> FakeGitLab:
        """A project the token may write to, reachable by its numeric id or its URL-encoded path."""
        with self.lock:
            self.projects[path] = {
                "id": project_id or next(self.ids),
                "default_branch": default_branch,
                "iids": itertools.count(1),
            }
            self.mrs.setdefault(path, [])
        return self

    def merge_requests(
        self, project: str, *, source_branch: str | None = None, state: str | None = None
    ) -> list[dict[str, Any]]:
        """The merge requests of `project` (its path), oldest first."""
        with self.lock:
            return [
                m
                for m in self.mrs.get(project, [])
                if (source_branch is None or m["source_branch"] == source_branch)
                and (state is None or m["state"] == state)
            ]

    def error_body(self, status: int) -> Any:
        words = {401: "401 Unauthorized", 403: "403 Forbidden", 404: "404 Not found", 409: "409 Conflict"}
        return {"message": words.get(status, f"{status} {HTTPStatus(status).phrase}")}

    @property
    def url(self) -> str:
        return f"{self.base}/api/v4"

    def send(self, hook: str, trigger: str, headers: dict[str, str], body: bytes) -> int:
        """GitLab sends a new event (its `Idempotency-Key` names it across attempts): one attempt, logged."""
        key = headers["Idempotency-Key"]
        self.hook(hook).sent[key] = Sent(dict(headers), body, trigger, None)
        return self.deliver(hook, key)

    def deliver(self, hook: str, guid: str) -> int:
        sent = self.hook(hook).sent[guid]
        # Every request of GitLab's carries a new X-Gitlab-Webhook-UUID; the rest, body included, is the same.
        sent.headers["X-Gitlab-Webhook-UUID"] = str(uuid.uuid4())
        return super().deliver(hook, guid)

    def log_attempt(self, hook: str, guid: str, status: int) -> dict:
        with self.lock:
            sent = self.hook(hook).sent[guid]
            shown = {k: ("[REDACTED]" if k == "X-Gitlab-Token" else v) for k, v in sent.headers.items()}
            record = {
                "id": next(self.ids),
                "url": "https://svc.example/api/v1/webhooks/forge",
                "trigger": sent.event,
                "request_headers": shown,
                "request_data": json.loads(sent.body),
                "response_headers": {},
                "response_body": "",
                "execution_duration": 0.2,
                "response_status": str(status) if status else "internal error",
            }
            self.hook(hook).log.append(record)
            return record

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes):
        parts = urlsplit(path)
        if headers.get("PRIVATE-TOKEN") != self.token:
            return self._json(401, {"message": "401 Unauthorized"})
        route = parts.path.strip("/").removeprefix("api/v4/")
        segments = route.split("/")  # split before decoding: an encoded path ("group%2Fname") is one segment
        if method == "GET" and route == "user":
            return self._json(200, {"id": 7, "username": "svc-bot", "name": "svc", "state": "active", "bot": True})
        if segments[0] == "projects" and len(segments) >= 2 and (len(segments) == 2 or segments[2] == "merge_requests"):
            return self._write(method, [unquote(s) for s in segments], parse_qs(parts.query), headers, raw)
        if method == "GET" and route.endswith("/events"):
            return self._list(route.removesuffix("/events"), parse_qs(parts.query))
        if method == "POST" and route.endswith("/resend"):
            hook, _, rest = route.rpartition("/events/")
            return self._resend(hook, rest.removesuffix("/resend"))
        return self._json(404, {"message": "404 Not found"})

    # -- the forge writes: projects, merge requests, notes -------------------------------------------------

    def _project(self, ident: str) -> str | None:
        for path, project in self.projects.items():
            if ident == path or ident == str(project["id"]):
                return path
        return None

    def _write(self, method: str, segments: list[str], query: dict[str, list[str]], headers: dict[str, str], raw):
        path = self._project(segments[1])
        if path is None:
            return self._json(404, {"message": "404 Project Not Found"})
        if path in self.forbidden and method == "POST":
            return self._json(403, self.error_body(403))
        rest, body = segments[2:], _parsed(raw, form=headers.get("Content-Type", "").startswith("application/x-www"))
        if method == "GET" and rest == []:
            return self._json(200, self._project_record(path))
        if rest == ["merge_requests"] and method == "GET":
            return self._list_mrs(path, query)
        if rest == ["merge_requests"] and method == "POST":
            return self._create_mr(path, body)
        mr = self._mr(path, rest[1]) if len(rest) >= 2 else None
        if mr is None:
            return self._json(404, {"message": "404 Not found"})
        if len(rest) == 2 and method == "GET":
            return self._json(200, mr)
        if len(rest) == 3 and rest[2] == "notes" and method == "POST":
            return self._note(path, mr, body)
        return self._json(404, {"message": "404 Not found"})

    def _project_record(self, path: str) -> dict[str, Any]:
        project = self.projects[path]
        return {
            "id": project["id"],
            "name": path.rsplit("/", 1)[-1],
            "path": path.rsplit("/", 1)[-1],
            "path_with_namespace": path,
            "default_branch": project["default_branch"],
            "visibility": "private",
            "web_url": f"https://gitlab.example/{path}",
            "http_url_to_repo": f"https://gitlab.example/{path}.git",
        }

    def _mr(self, path: str, iid: str) -> dict[str, Any] | None:
        with self.lock:
            return next((m for m in self.mrs[path] if str(m["iid"]) == iid), None)

    def _list_mrs(self, path: str, query: dict[str, list[str]]):
        state = (query.get("state") or ["all"])[0]
        if state not in ("opened", "closed", "locked", "merged", "all"):
            return self._json(400, {"error": "state does not have a valid value"})
        per_page = _integer(query, "per_page", 20)
        if per_page is None or per_page < 1:
            return self._json(400, {"error": "per_page does not have a valid value"})
        source = (query.get("source_branch") or [None])[0]
        with self.lock:
            found = [
                m
                for m in reversed(self.mrs[path])
                if (state == "all" or m["state"] == state) and (source is None or m["source_branch"] == source)
            ]
        return self._json(200, found)

    def _create_mr(self, path: str, body: Any):
        body = body if isinstance(body, dict) else {}
        for field_name in ("source_branch", "target_branch", "title"):
            if not isinstance(body.get(field_name), str) or not body[field_name]:
                return self._json(400, {"error": f"{field_name} is missing"})
        source, target, title = body["source_branch"], body["target_branch"], body["title"]
        too_long = {
            name: [f"is too long (maximum is {most} characters)"]
            for name, most in (("title", 255), ("description", 1_048_576))
            if isinstance(body.get(name), str) and len(body[name]) > most
        }
        if too_long:
            return self._json(400, {"message": too_long})
        with self.lock:
            clash = [
                m
                for m in self.merge_requests(path, source_branch=source, state="opened")
                if m["target_branch"] == target
            ]
            if clash:
                message = f"Another open merge request already exists for this source branch: !{clash[0]['iid']}"
                return self._json(409, {"message": [message]})
            project = self.projects[path]
            iid, stamp = next(project["iids"]), _stamp(self.clock())
            draft = title.lower().startswith(("draft:", "[draft]", "(draft)"))
            mr = {
                "id": next(self.ids),
                "iid": iid,
                "project_id": project["id"],
                "title": title,
                "description": body.get("description"),
                "state": "opened",
                "created_at": stamp,
                "updated_at": stamp,
                "merged_by": None,
                "merged_at": None,
                "closed_at": None,
                "target_branch": target,
                "source_branch": source,
                "author": {"id": 7, "username": "svc-bot", "name": "svc", "state": "active"},
                "source_project_id": project["id"],
                "target_project_id": project["id"],
                "labels": [],
                "draft": draft,
                "work_in_progress": draft,
                "merge_status": "checking",
                "detailed_merge_status": "checking",
                "sha": uuid.uuid4().hex + uuid.uuid4().hex[:8],
                "references": {"short": f"!{iid}", "relative": f"!{iid}", "full": f"{path}!{iid}"},
                "web_url": f"https://gitlab.example/{path}/-/merge_requests/{iid}",
                "sent_draft_attribute": "draft" in body,
            }
            self.mrs[path].append(mr)
        return self._json(201, {k: v for k, v in mr.items() if k != "sent_draft_attribute"})

    def _note(self, path: str, mr: dict[str, Any], body: Any):
        if not isinstance(body, dict) or not isinstance(body.get("body"), str) or not body["body"]:
            return self._json(400, {"error": "body is missing"})
        ident, stamp = next(self.ids), _stamp(self.clock())
        note = {
            "id": ident,
            "type": None,
            "body": body["body"],
            "attachment": None,
            "author": {"id": 7, "username": "svc-bot", "name": "svc", "state": "active"},
            "created_at": stamp,
            "updated_at": stamp,
            "system": False,
            "noteable_id": mr["id"],
            "noteable_type": "MergeRequest",
            "project_id": self.projects[path]["id"],
            "noteable_iid": mr["iid"],
            "resolvable": False,
            "confidential": False,
            "internal": False,
        }
        with self.lock:
            self.notes.append({**note, "project": path, "iid": mr["iid"]})
        return self._json(201, note)

    # -- hook events -----------------------------------------------------------------------------------------

    def _refusal(self, hook: str):
        if hook not in self.hooks:
            return self._json(404, {"message": "404 Not found"})
        if hook in self.forbidden:
            return self._json(403, {"message": "403 Forbidden"})
        return None

    def _list(self, hook: str, query: dict[str, list[str]]):
        refused = self._refusal(hook)
        if refused:
            return refused
        # GitLab's code (lib/api/hooks/events.rb): `status` one of the HTTP codes or three words, `per_page` 1..20.
        status = (query.get("status") or [""])[0]
        if status and status not in HOOK_EVENT_STATUSES and not (status.isdigit() and 100 <= int(status) <= 599):
            return self._json(400, {"error": "status does not have a valid value"})
        per_page, page_number = _integer(query, "per_page", 20), _integer(query, "page", 1)
        if per_page is None or not 1 <= per_page <= 20:
            return self._json(400, {"error": "per_page does not have a valid value"})
        if page_number is None or page_number < 1:
            return self._json(400, {"error": "page does not have a valid value"})

        def wanted(record: dict[str, Any]) -> bool:
            code = record["response_status"]
            number = int(code) if code.isdigit() else 0
            if status == "server_failure":
                return number >= 500 or number == 0
            if status == "client_failure":
                return 400 <= number < 500
            if status == "successful":
                return 200 <= number < 300
            return True

        with self.lock:
            matching = [r for r in reversed(self.hook(hook).log) if wanted(r)]
        start = (page_number - 1) * per_page
        page: list[Any] = matching[start : start + per_page]
        if page_number == 1 and hook in self.malformed:
            page = [self.malformed[hook], *page]
        pages = max(1, -(-len(matching) // per_page))
        headers = {
            "X-Page": str(page_number),
            "X-Per-Page": str(per_page),
            "X-Total": str(len(matching)),
            "X-Total-Pages": str(pages),
            "X-Next-Page": str(page_number + 1) if page_number < pages else "",
        }
        return self._json(200, page, headers)

    def _resend(self, hook: str, event: str):
        refused = self._refusal(hook)
        if refused:
            return refused
        with self.lock:
            # GitLab's code counts resends by the hook's parent (the project) and the user, not by hook.
            sent = self.resends.setdefault(hook.split("/hooks/")[0], deque())
            now = self.monotonic()
            while sent and now - sent[0] >= 60:
                sent.popleft()
            if len(sent) >= 5:
                wait = max(1, int(60 - (now - sent[0])))
                message = "This endpoint has been requested too many times. Try again later."
                headers = {
                    "Retry-After": str(wait),
                    "RateLimit-Limit": "5",
                    "RateLimit-Observed": str(len(sent) + 1),
                    "RateLimit-Remaining": "0",
                    "RateLimit-Reset": str(int(time.time()) + wait),
                }
                return self._json(429, {"message": message}, headers)
            sent.append(now)
            record = next((r for r in self.hook(hook).log if str(r["id"]) == event), None)
        if record is None:
            return self._json(404, {"message": "404 Not found"})
        key = record["request_headers"].get("Idempotency-Key")
        status = self.deliver(hook, key)
        return self._json(201, {"response_status": status})


# The words GitLab's hook events take as `status`, beside an HTTP status code.
HOOK_EVENT_STATUSES = ("successful", "client_failure", "server_failure")


def _integer(query: dict[str, list[str]], name: str, default: int) -> int | None:
    """A query parameter GitLab declares as an Integer: its value, the default when absent, None when not one."""
    text = (query.get(name) or [str(default)])[0]
    try:
        return int(text)
    except ValueError:
        return None


def _parsed(raw: bytes, *, form: bool = False) -> Any:
    """A request's body as the forge reads it: JSON (or a form, GitLab takes both); None when empty or unreadable."""
    if not raw:
        return None
    try:
        if form:
            return {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
