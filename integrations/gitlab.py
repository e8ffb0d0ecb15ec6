"""GitLab's REST API, outbound (its webhooks, inbound: `domain/router/senders/gitlab.py`): the events of a
project hook, listed by status, and a resend of one; and the forge writes of a dispatched job (CONTRACT.md, "The
forge writes"): a draft merge request for a branch, never two for one source branch, and a note on it.

A project is named by its numeric id or its path ("group/subgroup/name"), which goes URL-encoded as one path
segment (`projects/group%2Fname`), as GitLab's API asks. A merge request is written in three calls: `GET
/projects/{id}` for its `default_branch`; `GET /projects/{id}/merge_requests?source_branch=&state=opened`, whose
first open one is returned as it is (`created=False`); else `POST /projects/{id}/merge_requests {source_branch,
target_branch, title, description}`. GitLab's create call has no draft attribute: a draft is asked for, as its docs
say, by a `Draft: ` prefix on the title (the merge request then answers `"draft": true`). A 409 to that POST
(another open merge request has this source branch) is read as "it exists": the open one is read again and
returned. A note is `POST /projects/{id}/merge_requests/{iid}/notes {body}`; GitLab's answer has no URL, so its
address is the merge request's `web_url` + `#note_{id}`, as GitLab's pages link a note.

A hook is named by its API path, `projects/{id}/hooks/{hook_id}`. Its events (`GET {hook}/events`, GitLab keeps
seven days) are filtered by `status` (`server_failure`: 5xx or no answer; `client_failure`: 4xx), paged by `page`
and `per_page` with the `X-Next-Page` header (empty on the last page), newest first; GitLab's code declares this
`per_page` as `values: 1..20` and answers 400 "per_page does not have a valid value" above it, so the events are read
20 a page. Each is `{id, url, trigger, request_headers, request_data, response_status, ...}`, its `request_headers`
carrying the `Idempotency-Key` that every attempt of one event keeps (and `X-Gitlab-Event-UUID`). `POST
{hook}/events/{id}/resend` sends it again, at most five times a minute for each project and user (GitLab's code
scopes the limit to the hook's parent and the user, whatever its docs say of hooks): past that GitLab answers 429. The
client paces itself so that a sixth resend for one project never goes within 60 s of the first, and a 429 waits its
`Retry-After` (else `RateLimit-Reset`, else a minute) once. No lock is held while it waits.

A merge request's title is `Draft: ` + the title, cut to GitLab's 255 characters in all.

Listings stop at `transport.MAX_PAGES` pages; a reading that reached the cap says so (`EventLog.truncated`).

The token goes as `PRIVATE-TOKEN`, never into an error's text. Failures are `TransportError`s, read as for every
target (`integrations/transport.py`); a 429 waits `Retry-After`, else until `RateLimit-Reset`, else a minute, and
a refusal's detail carries GitLab's own `message`.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

import requests

from integrations import transport
from integrations.timestamps import parse_time
from integrations.transport import TransportError

TARGET = "GitLab"
USER_AGENT = "svc-delivery/1 (gitlab)"
PER_PAGE = 100
# A hook's events: GitLab declares their `per_page` as 1..20.
EVENTS_PER_PAGE = 20
# GitLab's limit on resends: five a minute for each project (the hook's parent) and user.
RESENDS_PER_WINDOW = 5
RESEND_WINDOW = 60.0
# A 429 that says nothing of when waits this long.
RATE_LIMIT_WAIT = 60.0
# GitLab's limit on a merge request's title, in characters.
MAX_TITLE = 255
# A project as an envelope's `subject.repo` names it: its path ("group/sub/name") or its numeric id.
PROJECT = re.compile(r"^(?:[0-9]{1,19}|[A-Za-z0-9_.-]{1,255}(?:/[A-Za-z0-9_.-]{1,255}){1,20})$")
# The title prefixes GitLab reads as "draft"; the first is the one the forge writes add.
DRAFT_PREFIXES = ("Draft:", "[Draft]", "(Draft)")
# A hook's API path, as SVC_GITLAB_HOOKS names it.
HOOK_PATH = re.compile(r"^projects/[0-9]{1,19}/hooks/[0-9]{1,19}$")
SERVER_FAILURE = "server_failure"
CLIENT_FAILURE = "client_failure"


@dataclass(frozen=True)
class HookEvent:
    """One attempt GitLab made to deliver an event to a hook."""

    id: int
    trigger: str | None
    response_status: str  # "500", "404", or GitLab's words for no answer ("internal error")
    idempotency_key: str | None
    event_uuid: str | None
    created_at: datetime | None  # not every GitLab version lists it

    @property
    def guid(self) -> str | None:
        """What names the event across its attempts: its Idempotency-Key, else its Event-UUID."""
        return self.idempotency_key or self.event_uuid


@dataclass(frozen=True)
class MergeRequest:
    """A merge request the forge writes made or found: `created` is False when an open one for that source branch
    existed already and is returned instead (never two for one branch)."""

    iid: int
    web_url: str
    created: bool
    description: str = field(default="", compare=False)  # what it says (the service knows its own by its footer)


@dataclass
class EventLog:
    """What one reading of a hook's events found, newest first, and the records that could not be read."""

    events: list[HookEvent] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    truncated: bool = False  # the page cap stopped the reading before it reached back: older events were not read


class GitLab:
    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        timeout: tuple[float, float] = transport.DEFAULT_TIMEOUT,
        session: requests.Session | None = None,
        tries: int = 3,
        budget: float = transport.RETRY_BUDGET,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.api_url = api_url.rstrip("/")
        self.auth = transport.HeaderAuth(token, header="PRIVATE-TOKEN")
        self.timeout = timeout
        self.session = session or transport.session(USER_AGENT)
        self.tries = tries
        self.budget = budget
        self.monotonic = monotonic
        self.sleep = sleep
        # project -> when its latest resends went (or will go: a slot is taken before the wait), monotonic seconds
        self._resent: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    # -- hook events ------------------------------------------------------------------------------------

    def hook_events(
        self,
        hook: str,
        *,
        status: str,
        after_id: int | None = None,
        since: datetime | None = None,
        max_pages: int = transport.MAX_PAGES,
    ) -> EventLog:
        """The events of `hook` with `status`, newest first, newer than event `after_id` and (where GitLab lists
        the time) made at or after `since`; pages are followed by `X-Next-Page` until one reaches back past
        `after_id`, or `max_pages` were read (then `truncated`). Raises `TransportError` when a page cannot be had
        or is not a list."""
        log = EventLog()
        page = 1
        for number in range(1, max_pages + 1):
            response = self._call(
                "GET", f"{hook}/events", params={"status": status, "per_page": EVENTS_PER_PAGE, "page": page}
            )
            records = _json(response, f"events page {page} of {hook}")
            if not isinstance(records, list):
                raise TransportError(f"{TARGET}'s events page {page} of {hook} is not a list", permanent=True)
            reached_back = False
            for index, record in enumerate(records):
                try:
                    event = _event(record)
                except ValueError as exc:
                    log.malformed.append(f"{hook}: event record {index} of page {page}: {exc}")
                    continue
                if after_id is not None and event.id <= after_id:
                    reached_back = True
                    continue
                if since is not None and event.created_at is not None and event.created_at < since:
                    reached_back = True
                    continue
                log.events.append(event)
            following = (response.headers.get("X-Next-Page") or "").strip()
            if reached_back or not records or not following:
                return log
            if number == max_pages:
                log.truncated = True
                return log
            try:
                page = int(following)
            except ValueError:
                raise TransportError(f"{TARGET}'s X-Next-Page of {hook} is not a page number", permanent=True) from None
        return log

    def resend(self, hook: str, event_id: int) -> None:
        """Send event `event_id` of `hook` again. Paced: never a sixth resend for the hook's project within 60 s; a
        429 waits its `Retry-After` (else `RateLimit-Reset`, else a minute; at most a minute) and is tried once
        more."""
        path = f"{hook}/events/{int(event_id)}/resend"
        for attempt in (1, 2):
            wait = self._room_for_resend(_project_of(hook))
            if wait > 0:
                self.sleep(wait)
            try:
                self._call("POST", path, tries=1)
                return
            except TransportError as exc:
                if not exc.rate_limited or attempt == 2:
                    raise
                self.sleep(min(exc.retry_after if exc.retry_after is not None else RATE_LIMIT_WAIT, RESEND_WINDOW))

    # -- the forge writes ------------------------------------------------------------------------------

    def default_branch(self, project: str) -> str:
        """The project's default branch, where a merge request goes (`GET /projects/{id}`)."""
        found = _json(self._call("GET", f"projects/{project_id(project)}"), f"project {project}")
        branch = found.get("default_branch") if isinstance(found, dict) else None
        if not isinstance(branch, str) or not branch:
            raise TransportError(f"{TARGET}'s project {project} has no default branch (empty?)", permanent=True)
        return branch

    def open_merge_request(self, project: str, branch: str) -> MergeRequest | None:
        """The first open merge request whose source branch is `branch`, or None."""
        response = self._call(
            "GET",
            f"projects/{project_id(project)}/merge_requests",
            params={"source_branch": branch, "state": "opened", "per_page": PER_PAGE},
        )
        listed = _json(response, f"merge requests of {project}")
        if not isinstance(listed, list):
            raise TransportError(f"{TARGET}'s merge requests of {project} are not a list", permanent=True)
        for record in listed:
            if isinstance(record, dict) and record.get("source_branch") == branch and record.get("state") == "opened":
                return _merge_request(record, created=False)
        return None

    def draft_merge_request(
        self, project: str, *, branch: str, title: str, body: str, draft: bool = True
    ) -> MergeRequest:
        """The open merge request of `branch` into the default branch of `project`: the one already open for that
        source branch (`created=False`), else a new one with this title (prefixed `Draft: ` unless `draft` is False
        or the title says so already) and `body` as its description. Raises `TransportError`."""
        ident = project_id(project)
        target = self.default_branch(project)
        existing = self.open_merge_request(project, branch)
        if existing is not None:
            return existing
        sent_title = draft_title(title) if draft else title[:MAX_TITLE]
        payload = {"source_branch": branch, "target_branch": target, "title": sent_title, "description": body}
        try:
            response = self._call("POST", f"projects/{ident}/merge_requests", json=payload)
        except TransportError as exc:
            if exc.status != 409:
                raise
            existing = self.open_merge_request(project, branch)
            if existing is None:
                raise
            return existing
        return _merge_request(_json(response, f"new merge request of {project}"), created=True)

    def note(self, project: str, iid: int, body: str) -> str:
        """A note (a comment) `body` on merge request `iid` of `project`; its address on GitLab's pages."""
        ident, number = project_id(project), int(iid)
        found = _json(self._call("GET", f"projects/{ident}/merge_requests/{number}"), f"merge request !{number}")
        web_url = found.get("web_url") if isinstance(found, dict) else None
        if not isinstance(web_url, str) or not web_url.startswith(("https://", "http://")):
            raise TransportError(f"{TARGET}'s merge request !{number} of {project} has no web_url", permanent=True)
        written = _json(
            self._call("POST", f"projects/{ident}/merge_requests/{number}/notes", json={"body": body}),
            f"note on !{number}",
        )
        note_id = written.get("id") if isinstance(written, dict) else None
        if not isinstance(note_id, int) or isinstance(note_id, bool):
            raise TransportError(f"{TARGET}'s note on !{number} of {project} has no id", permanent=True)
        return f"{web_url}#note_{note_id}"

    def own_login(self) -> str:
        """The username of the account the token is (`GET /user`): the sender of what the service itself does."""
        found = _json(self._call("GET", "user"), "user of the token")
        username = found.get("username") if isinstance(found, dict) else None
        if not isinstance(username, str) or not username:
            raise TransportError(f"{TARGET}'s user of the token has no username", permanent=True)
        return username

    def _room_for_resend(self, project: str) -> float:
        """Take the next resend slot of `project` and say how long to wait for it (0: now). The slot is taken under
        the lock and the wait is the caller's, outside it: two threads never take one slot, and neither sleeps while
        holding the other up."""
        with self._lock:
            now = self.monotonic()
            sent = self._resent.setdefault(project, deque(maxlen=RESENDS_PER_WINDOW))
            at = max(now, sent[0] + RESEND_WINDOW) if len(sent) == RESENDS_PER_WINDOW else now
            sent.append(at)
            return at - now

    # -- one call ---------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, *, tries: int | None = None, **kwargs: Any) -> requests.Response:
        return transport.call(
            self.session,
            method,
            f"{self.api_url}/{path.lstrip('/')}",
            target=TARGET,
            timeout=self.timeout,
            auth=self.auth,
            tries=self.tries if tries is None else tries,
            budget=self.budget,
            read_error=error_for,
            **kwargs,
        )


def error_for(response: requests.Response) -> TransportError | None:
    status = response.status_code
    if status == 429:
        headers, at = response.headers, transport.answered_at(response)
        wait = transport.parse_retry_after(headers.get("Retry-After"), now=at)
        if wait is None:
            wait = transport.until_epoch(headers.get("RateLimit-Reset"), now=at)
        return transport.error_for(response, TARGET, retry_after=RATE_LIMIT_WAIT if wait is None else wait)
    detail = ""
    if status == 404:
        detail = " (no such project, hook, event or merge request, or the token may not see it)"
    elif 400 <= status < 500:
        said = _said(response)
        detail = f" (the request was refused: {said})" if said else " (the request was refused)"
    return transport.error_for(response, TARGET, detail=detail)


def project_id(project: str | int) -> str:
    """The project as one segment of an API path: a numeric id as it is, a path URL-encoded ("group%2Fname")."""
    text = str(project) if isinstance(project, int) and not isinstance(project, bool) else project
    if not isinstance(text, str) or PROJECT.match(text) is None or any(p in (".", "..") for p in text.split("/")):
        raise TransportError(f"{str(project)!r:.120} is not a GitLab project (a path or an id)", permanent=True)
    return quote(text, safe="")


def draft_title(title: str) -> str:
    """`title` as GitLab reads a draft's: with the `Draft: ` prefix (unless it has one of GitLab's already), cut to
    GitLab's 255 characters in all."""
    stripped = title.lstrip()
    if not stripped.lower().startswith(tuple(p.lower() for p in DRAFT_PREFIXES)):
        title = f"Draft: {title}"
    return title[:MAX_TITLE]


def _project_of(hook: str) -> str:
    """The project of a hook's API path (`projects/{id}/hooks/{hook_id}`): what GitLab's resend limit counts by."""
    parts = hook.strip("/").split("/")
    return parts[1] if len(parts) > 1 and parts[0] == "projects" else hook


def _merge_request(record: Any, *, created: bool) -> MergeRequest:
    iid = record.get("iid") if isinstance(record, dict) else None
    url = record.get("web_url") if isinstance(record, dict) else None
    if not isinstance(iid, int) or isinstance(iid, bool) or iid < 1:
        raise TransportError(f"{TARGET}'s merge request answer has no iid", permanent=True)
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise TransportError(f"{TARGET}'s merge request !{iid} has no web_url", permanent=True)
    said = record.get("description")
    return MergeRequest(iid=iid, web_url=url, created=created, description=said if isinstance(said, str) else "")


def _said(response: requests.Response) -> str:
    """GitLab's own words in a refusal (`message`, a string, a list or a field -> list map; or `error`), short and
    printable: they name the request's fields, never its headers."""
    try:
        answer = response.json()
    except ValueError:
        return ""
    said = answer.get("message", answer.get("error")) if isinstance(answer, dict) else None
    if isinstance(said, dict):
        said = "; ".join(f"{k} {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in said.items())
    elif isinstance(said, list):
        said = "; ".join(map(str, said))
    if not isinstance(said, str):
        return ""
    return "".join(c for c in said if c.isprintable())[:300]


def _json(response: requests.Response, what: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise TransportError(f"{TARGET}'s {what} is not JSON", permanent=True, status=response.status_code) from None


def _header(headers: dict[str, Any], name: str) -> str | None:
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() == name.lower() and isinstance(value, str):
            text = value.strip()
            return text if 0 < len(text) <= 150 and text.isprintable() else None
    return None


def _event(record: Any) -> HookEvent:
    """One hook event record, or ValueError saying what it lacks."""
    if not isinstance(record, dict):
        raise ValueError("not an object")
    ident = record.get("id")
    if not isinstance(ident, int) or isinstance(ident, bool) or ident < 1:
        raise ValueError("no numeric id")
    headers = record.get("request_headers")
    if not isinstance(headers, dict):
        raise ValueError(f"event {ident} has no request_headers")
    status = record.get("response_status")
    if isinstance(status, int) and not isinstance(status, bool):
        status = str(status)
    if not isinstance(status, str) or not status:
        raise ValueError(f"event {ident} has no response_status")
    key, uuid = _header(headers, "Idempotency-Key"), _header(headers, "X-Gitlab-Event-UUID")
    if key is None and uuid is None:
        raise ValueError(f"event {ident} names no Idempotency-Key or X-Gitlab-Event-UUID")
    trigger = record.get("trigger")
    return HookEvent(
        id=ident,
        trigger=trigger if isinstance(trigger, str) and trigger else None,
        response_status=status[:32],
        idempotency_key=key,
        event_uuid=uuid,
        created_at=parse_time(record.get("created_at")),
    )
