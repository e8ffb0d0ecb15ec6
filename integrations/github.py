"""GitHub's REST API, outbound (its webhooks, inbound: `domain/router/senders/github.py`): the webhook deliveries of
a repository's or an organization's hook, listed newest first, and a redelivery of one; and the forge writes of a
dispatched job (CONTRACT.md, "The forge writes"): a draft pull request for a branch, never two for one head, and a
comment on it.

A pull request is written in three calls: `GET /repos/{owner}/{repo}` for its `default_branch`; `GET
/repos/{owner}/{repo}/pulls?head={owner}:{branch}&state=open`, whose first open pull request for that head is
returned as it is (`created=False`); else `POST /repos/{owner}/{repo}/pulls {title, body, head, base, draft}`. A 422
"A pull request already exists" to that POST (one was opened between the two calls, or an earlier try's answer was
lost) is read as the same: the open one is read again and returned. A comment is `POST
/repos/{owner}/{repo}/issues/{number}/comments {body}` (a pull request is an issue to GitHub), answered with its
`html_url`.

A hook is named by its API path, `repos/{owner}/{repo}/hooks/{hook_id}` or `orgs/{org}/hooks/{hook_id}`. Its
deliveries (`GET {hook}/deliveries?per_page=100`, GitHub keeps three days of them) come newest first, paged by an
opaque `cursor` that the `Link: <…>; rel="next"` header carries; each is `{id, guid, delivered_at, redelivery,
duplicate, status, status_code, event, action, ...}`, where `guid` is the `X-GitHub-Delivery` every attempt of
one event carries and `status_code` 0 means no answer. `POST {hook}/deliveries/{id}/attempts` asks GitHub to
deliver it again (202).

Failures are `TransportError`s (`integrations/transport.py`), read as GitHub means them (its docs, "Rate limits
for the REST API"): a 403 or 429 whose message mentions a secondary rate limit, or that carries `retry-after`, or
`x-ratelimit-remaining: 0`, is a rate limit and transient: it waits `retry-after`, else until `x-ratelimit-reset`,
else at least a minute (GitHub's secondary limits often say nothing of when). 5xx is transient. Only a 401, or a 403
that is none of these, is a refused token; 404 an unknown hook or repository (or one the token may not see), 400/422
a bad cursor or request: permanent, its detail carrying GitHub's own words with the fields they name (`errors[]`'s
`field` and `code`), which a person reads as the job's `forge.error`. A 422 refusing a draft ("Draft pull requests
are not supported in this repository") fails the write with that message: it never falls back to a ready pull
request. A renamed repository answers 301 (307 for a write) to its new address, which `transport.send` follows on
the same host. The token goes as `Authorization: Bearer`, never into an error's text.

Listings stop at `transport.MAX_PAGES` pages; a reading that reached the cap says so (`DeliveryLog.truncated`), so that
its reader keeps its checkpoint where it was.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import requests

from integrations import transport
from integrations.timestamps import parse_time
from integrations.transport import TransportError

TARGET = "GitHub"
USER_AGENT = "svc-delivery/1 (github)"
API_VERSION = "2022-11-28"
PER_PAGE = 100
# GitHub's docs: a rate-limited answer that says nothing of when waits at least a minute.
SECONDARY_WAIT = 60.0
# The words of GitHub's secondary rate limits ("You have exceeded a secondary rate limit. Please wait a few minutes
# before you try again.").
SECONDARY = "secondary rate limit"
# A repository as an envelope's `subject.repo` names it, "owner/name".
REPO_NAME = re.compile(r"^([A-Za-z0-9_.-]{1,100})/([A-Za-z0-9_.-]{1,100})$")
# GitHub's words when a pull request for that head is open already (422 to the POST).
ALREADY_EXISTS = "pull request already exists"
# A hook's API path, as SVC_GITHUB_HOOKS names it.
HOOK_PATH = re.compile(r"^(?:repos/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|orgs/[A-Za-z0-9_.-]+)/hooks/[0-9]{1,19}$")


@dataclass(frozen=True)
class HookDelivery:
    """One attempt GitHub made to deliver an event to a hook."""

    id: int
    guid: str
    delivered_at: datetime
    redelivery: bool
    status_code: int  # 0: no answer (a timeout, a refused connection)
    event: str | None
    action: str | None

    @property
    def answered_2xx(self) -> bool:
        return 200 <= self.status_code < 300


@dataclass(frozen=True)
class PullRequest:
    """A pull request the forge writes made or found: `created` is False when an open one for that head existed
    already and is returned instead (never two for one head)."""

    number: int
    html_url: str
    created: bool
    body: str = field(default="", compare=False)  # what it says (the service knows its own by its footer)


@dataclass
class DeliveryLog:
    """What one reading of a hook's deliveries found: the deliveries since the moment asked for, newest first,
    and the records that could not be read (each described, none of them a token). `truncated`: the page cap
    stopped the reading before it reached back to the moment asked for, so older deliveries were not read."""

    deliveries: list[HookDelivery] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    truncated: bool = False


class GitHub:
    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        timeout: tuple[float, float] = transport.DEFAULT_TIMEOUT,
        session: requests.Session | None = None,
        tries: int = 3,
        budget: float = transport.RETRY_BUDGET,
    ):
        self.api_url = api_url.rstrip("/")
        # As explicit auth, so a ~/.netrc entry for the host can never replace the token.
        self.auth = transport.HeaderAuth(f"Bearer {token}")
        self.timeout = timeout
        self.session = session or transport.session(USER_AGENT)
        self.session.headers["Accept"] = "application/vnd.github+json"
        self.session.headers["X-GitHub-Api-Version"] = API_VERSION
        self.tries = tries
        self.budget = budget

    # -- webhook deliveries -----------------------------------------------------------------------------

    def deliveries_since(self, hook: str, since: datetime, *, max_pages: int = transport.MAX_PAGES) -> DeliveryLog:
        """The deliveries of `hook` made at or after `since`, newest first, following the `Link` header's next
        pages until a page reaches back past `since`, or `max_pages` were read (then `truncated`). Raises
        `TransportError` when a page cannot be had or is not a list of deliveries; a record that cannot be read is
        described in `malformed`."""
        log = DeliveryLog()
        listing = self._pages(f"{hook}/deliveries", max_pages=max_pages, params={"per_page": PER_PAGE})
        for number, page in enumerate(listing, start=1):
            records = _json(page, f"deliveries page {number} of {hook}")
            if not isinstance(records, list):
                raise TransportError(f"{TARGET}'s deliveries page {number} of {hook} is not a list", permanent=True)
            reached_back = False
            for index, record in enumerate(records):
                try:
                    delivery = _delivery(record)
                except ValueError as exc:
                    log.malformed.append(f"{hook}: delivery record {index} of page {number}: {exc}")
                    continue
                if delivery.delivered_at < since:
                    reached_back = True
                    continue
                log.deliveries.append(delivery)
            if reached_back or not records:
                return log
        log.truncated = listing.truncated
        return log

    def redeliver(self, hook: str, delivery_id: int) -> None:
        """Ask GitHub to deliver `delivery_id` of `hook` again (it answers 202 and delivers it soon after)."""
        self._call("POST", f"{hook}/deliveries/{int(delivery_id)}/attempts", tries=1)

    # -- the forge writes ------------------------------------------------------------------------------

    def default_branch(self, repo: str) -> str:
        """The repository's default branch, where a pull request goes (`GET /repos/{owner}/{repo}`)."""
        owner, name = _repo(repo)
        found = _json(self._call("GET", f"repos/{owner}/{name}"), f"repository {repo}")
        branch = found.get("default_branch") if isinstance(found, dict) else None
        if not isinstance(branch, str) or not branch:
            raise TransportError(f"{TARGET}'s repository {repo} names no default branch", permanent=True)
        return branch

    def open_pull_request(self, repo: str, branch: str) -> PullRequest | None:
        """The first open pull request whose head is `branch` of `repo` itself, or None."""
        owner, name = _repo(repo)
        response = self._call(
            "GET", f"repos/{owner}/{name}/pulls", params={"head": f"{owner}:{branch}", "state": "open", "per_page": 100}
        )
        listed = _json(response, f"pull requests of {repo}")
        if not isinstance(listed, list):
            raise TransportError(f"{TARGET}'s pull requests of {repo} are not a list", permanent=True)
        for record in listed:
            head = record.get("head") if isinstance(record, dict) else None
            # GitHub filters by head already; the check keeps a lax server (or a fork's same-named branch) out.
            if isinstance(head, dict) and head.get("ref") == branch and record.get("state", "open") == "open":
                return _pull_request(record, created=False)
        return None

    def draft_pull_request(self, repo: str, *, branch: str, title: str, body: str, draft: bool = True) -> PullRequest:
        """The open pull request of `branch` into the default branch of `repo` ("owner/name"): the one already
        open for that head (`created=False`), else a new one with this title and body, a draft unless `draft` is
        False. Raises `TransportError` (permanent for a refusal, transient for 5xx, 429 or no answer)."""
        owner, name = _repo(repo)
        base = self.default_branch(repo)
        existing = self.open_pull_request(repo, branch)
        if existing is not None:
            return existing
        payload = {"title": title, "body": body, "head": branch, "base": base, "draft": bool(draft)}
        try:
            response = self._call("POST", f"repos/{owner}/{name}/pulls", json=payload, read_error=_creation_error)
        except _AlreadyOpen as exc:
            existing = self.open_pull_request(repo, branch)
            if existing is None:  # GitHub says one exists, yet none is open for this head: nothing to return
                raise TransportError(exc.detail, permanent=True, status=exc.status) from None
            return existing
        return _pull_request(_json(response, f"new pull request of {repo}"), created=True)

    def comment(self, repo: str, number: int, body: str) -> str:
        """Comment `body` on pull request (or issue) `number` of `repo`; its `html_url`."""
        owner, name = _repo(repo)
        response = self._call("POST", f"repos/{owner}/{name}/issues/{int(number)}/comments", json={"body": body})
        written = _json(response, f"comment on #{int(number)} of {repo}")
        url = written.get("html_url") if isinstance(written, dict) else None
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise TransportError(f"{TARGET}'s comment on #{int(number)} of {repo} has no html_url", permanent=True)
        return url

    def own_login(self) -> str:
        """The login of the account the token is (`GET /user`): the sender of what the service itself does."""
        found = _json(self._call("GET", "user"), "user of the token")
        login = found.get("login") if isinstance(found, dict) else None
        if not isinstance(login, str) or not login:
            raise TransportError(f"{TARGET}'s user of the token has no login", permanent=True)
        return login

    # -- one call ---------------------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self.api_url}/{path.lstrip('/')}"

    def _call(
        self,
        method: str,
        path: str,
        *,
        tries: int | None = None,
        read_error: Callable[[requests.Response], TransportError | None] | None = None,
        **kwargs: Any,
    ) -> requests.Response:
        return transport.call(
            self.session,
            method,
            self._url(path),
            target=TARGET,
            timeout=self.timeout,
            auth=self.auth,
            tries=self.tries if tries is None else tries,
            budget=self.budget,
            read_error=read_error or error_for,
            **kwargs,
        )

    def _pages(self, path: str, **kwargs: Any) -> transport.Pages:
        return transport.Pages(
            self.session,
            self._url(path),
            target=TARGET,
            timeout=self.timeout,
            auth=self.auth,
            tries=self.tries,
            read_error=error_for,
            **kwargs,
        )


def error_for(response: requests.Response) -> TransportError | None:
    """GitHub's answer as a `TransportError` (None for a 2xx), read as the module's docstring says."""
    status = response.status_code
    said = _said(response) if status >= 400 else ""
    if status in (403, 429):
        headers, at = response.headers, transport.answered_at(response)
        retry_after = transport.parse_retry_after(headers.get("Retry-After"), now=at)
        spent = headers.get("x-ratelimit-remaining", "").strip() == "0"
        if status == 429 or retry_after is not None or spent or SECONDARY in said.lower():
            if retry_after is None and spent:
                retry_after = transport.until_epoch(headers.get("x-ratelimit-reset"), now=at)
            if retry_after is None:  # GitHub said nothing of when: at least a minute, as its docs ask
                retry_after = SECONDARY_WAIT
            words = f": {said}" if said else ""
            return TransportError(
                f"{TARGET} answered {status} (rate limited{words}); retry after {retry_after:g} s",
                permanent=False,
                retry_after=retry_after,
                status=status,
            )
    if status == 404:
        detail = " (no such hook or repository, or the token may not see it)"
    elif status in (400, 422):
        detail = f" (the request was refused: {said})" if said else " (the request or its cursor was refused)"
    elif status in (401, 403) and said:
        detail = f": {said}"
    else:
        detail = ""
    return transport.error_for(response, TARGET, detail=detail)


class _AlreadyOpen(TransportError):
    """GitHub's 422 to a new pull request whose head has an open one: not a failure, the caller reads that one."""


def _creation_error(response: requests.Response) -> TransportError | None:
    error = error_for(response)
    if error is not None and response.status_code == 422 and ALREADY_EXISTS in error.detail.lower():
        return _AlreadyOpen(error.detail, permanent=True, status=422)
    return error


def _said(response: requests.Response) -> str:
    """GitHub's own words in a refusal, short and printable: its `message`, then each of `errors[]` with the field it
    names and its code (`Validation Failed; head: invalid`), or the error's own message. They name the request's
    fields, never its headers, so they are safe to show."""
    try:
        answer = response.json()
    except ValueError:
        return ""
    if not isinstance(answer, dict):
        return ""
    words = [answer.get("message")]
    for error in answer.get("errors") or []:
        if isinstance(error, dict):
            named = ": ".join(str(error[k]) for k in ("field", "code") if isinstance(error.get(k), str) and error[k])
            message = error.get("message") if isinstance(error.get("message"), str) else ""
            words.append(f"{named} ({message})" if named and message else named or message)
        else:
            words.append(error)
    text = "; ".join(w for w in words if isinstance(w, str) and w)
    return "".join(c for c in text if c.isprintable())[:300]


def _repo(repo: str) -> tuple[str, str]:
    """("owner", "name") of "owner/name", or a permanent `TransportError`: a repository name GitHub cannot have is
    not worth a call (and must not steer the path)."""
    match = REPO_NAME.match(repo or "") if isinstance(repo, str) else None
    if match is None or {match.group(1), match.group(2)} & {".", ".."}:
        raise TransportError(f"{repo!r:.120} is not a GitHub repository (owner/name)", permanent=True)
    return match.group(1), match.group(2)


def _pull_request(record: Any, *, created: bool) -> PullRequest:
    number = record.get("number") if isinstance(record, dict) else None
    url = record.get("html_url") if isinstance(record, dict) else None
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise TransportError(f"{TARGET}'s pull request answer has no number", permanent=True)
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise TransportError(f"{TARGET}'s pull request #{number} has no html_url", permanent=True)
    said = record.get("body")
    return PullRequest(number=number, html_url=url, created=created, body=said if isinstance(said, str) else "")


def _json(response: requests.Response, what: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise TransportError(f"{TARGET}'s {what} is not JSON", permanent=True, status=response.status_code) from None


def _delivery(record: Any) -> HookDelivery:
    """One delivery record, or ValueError saying what it lacks."""
    if not isinstance(record, dict):
        raise ValueError("not an object")
    ident, guid, status_code = record.get("id"), record.get("guid"), record.get("status_code")
    if not isinstance(ident, int) or isinstance(ident, bool) or ident < 1:
        raise ValueError("no numeric id")
    if not isinstance(guid, str) or not 0 < len(guid) <= 200 or not guid.isprintable():
        raise ValueError(f"delivery {ident} has no guid")
    if not isinstance(status_code, int) or isinstance(status_code, bool) or not 0 <= status_code <= 999:
        raise ValueError(f"delivery {ident} has no status_code")
    delivered_at = parse_time(record.get("delivered_at"))
    if delivered_at is None:
        raise ValueError(f"delivery {ident} has no delivered_at time")
    event, action = record.get("event"), record.get("action")
    return HookDelivery(
        id=ident,
        guid=guid,
        delivered_at=delivered_at,
        redelivery=record.get("redelivery") is True,
        status_code=status_code,
        event=event if isinstance(event, str) and event else None,
        action=action if isinstance(action, str) and action else None,
    )
