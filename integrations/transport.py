"""How every outbound HTTP integration calls out and how it fails: one error type, `TransportError`, saying whether
trying again can help (`permanent`) and, when the target said so, after how long (`retry_after`); the one reading of
`Retry-After`; the one classification of `requests`' exceptions and of HTTP statuses; and `call`, one HTTP call done
right, in the few lines a new module needs.

The classification, the same for every target (healthchecks' transports share one `TransportError(permanent=...)`
the same way):
- transient, try again later: a timeout, a connection error, any other failure of `requests`, 5xx and 429 (with the
  target's `Retry-After`, when it sent one);
- permanent, give up and record why: 401 and 403 (the credentials were refused, and the detail says so), any other
  4xx, and a 3xx that is not followed.
A `301`, `307` or `308` to the same scheme, host and port is followed, the same request again (a renamed repository
answers so); one to another origin never is, nor any other 3xx: the credential must not travel to wherever a
redirect points.
A module adds what only its target knows (Discord's rate-limit headers, Linear's GraphQL error kinds) and raises the
same type; the outbox handlers (`jobs/`) read `permanent` and `retry_after` and nothing else.

Every call has a (connect, read) timeout and follows a redirect only to its own origin; the credential goes as
explicit `auth` (so a `~/.netrc` entry for the host can never replace it). Errors name the target as the caller
names it ("Linear"; a webhook URL shown without its token) and the exception's type, never a header or the text of a
`requests` exception (which quotes the URL), so no token reaches a log, a timeline or an outbox note. A module for a
REST API (the forges, say) needs no more than:

    session = transport.session("svc-delivery/1 (forge)")
    auth = transport.HeaderAuth(f"Bearer {token}")
    response = transport.call(session, "POST", url, target="GitHub", auth=auth, json={"body": text}, tries=3)
    for page in transport.pages(session, listing_url, target="GitHub", auth=auth):
        ...  # page.json(), one page at a time, following the Link header's rel="next"
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
import requests.auth

from integrations.timestamps import http_date

# (connect, read) seconds: every call is bounded, a hung target never holds a worker.
DEFAULT_TIMEOUT = (5.0, 20.0)
# A Retry-After above this is read as this: the caller keeps what it was sending and asks again later.
MAX_RETRY_AFTER = 3600.0
# `call`'s in-process retries (when the caller asks for them) stop once this many seconds have gone, as
# healthchecks' do: after that, the outbox's backoff is the better place to wait.
RETRY_BUDGET = 15.0
# The pause before the n-th retry when the target named none: RETRY_PAUSE * 2**(n-1) seconds.
RETRY_PAUSE = 1.0
# `pages` stops after this many pages unless the caller says otherwise: a listing is never followed without end.
MAX_PAGES = 100
# The redirects `send` follows (to the same origin only), and how many in a row before it gives up.
FOLLOWED_REDIRECTS = frozenset({301, 307, 308})
MAX_REDIRECTS = 3
_DEFAULT_PORTS = {"http": 80, "https": 443}


class TransportError(Exception):
    """An outbound call that did not do its job.

    `permanent`: trying again cannot help (give up, record `detail`); else it is transient, to be tried again no
    sooner than `retry_after` seconds when the target said so (None: the caller's own backoff). `status` is the HTTP
    status when there was an answer; `rate` what the answer's rate-limit headers said, when the module reads them.
    `detail` is safe to log and to show: it names the target as the caller did, never a header or a token.
    """

    def __init__(
        self,
        detail: str,
        *,
        permanent: bool,
        retry_after: float | None = None,
        status: int | None = None,
        rate: RateLimit | None = None,
    ):
        super().__init__(detail)
        self.detail = detail
        self.permanent = permanent
        self.retry_after = retry_after
        self.status = status
        self.rate = rate

    @property
    def rate_limited(self) -> bool:
        """The target refused for now because of its rate limit (429)."""
        return self.status == 429


@dataclass(frozen=True)
class RateLimit:
    """What one answer's rate-limit headers said, in the module's reading of its target's headers (None where a
    header was absent or unreadable). `reset_after` is in seconds from the answer."""

    limit: int | None = None
    remaining: int | None = None
    reset_after: float | None = None
    bucket: str | None = None
    scope: str | None = None
    is_global: bool = False

    def exhausted_for(self) -> float | None:
        """Seconds to send nothing more to this bucket (it said none remain), or None."""
        return self.reset_after if self.remaining == 0 and self.reset_after else None


class HeaderAuth(requests.auth.AuthBase):
    """A credential sent as one header, as it is: Linear's key (`Authorization: <key>`), a bearer token
    (`HeaderAuth(f"Bearer {token}")`), GitLab's `HeaderAuth(token, header="PRIVATE-TOKEN")`. Its repr hides it."""

    def __init__(self, value: str, *, header: str = "Authorization"):
        self._value = value
        self.header = header

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers[self.header] = self._value
        return request

    def __repr__(self) -> str:
        return f"HeaderAuth(header={self.header!r}, value=…)"


def session(user_agent: str) -> requests.Session:
    """A session for one target: connections are kept between its calls; every request carries `user_agent`."""
    made = requests.Session()
    made.headers["User-Agent"] = user_agent
    return made


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """`Retry-After` in seconds: delay-seconds, or an HTTP-date counted from `now` (default: this machine's clock;
    a date already past is 0). None when absent or unreadable; never above `MAX_RETRY_AFTER`."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        when = http_date(text)
        if when is None:
            return None
        seconds = max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER)


def until_epoch(value: str | None, *, now: datetime | None = None, unit: float = 1.0) -> float | None:
    """Seconds from `now` (default: this machine's clock) until the epoch time `value` (in `unit`s of a second:
    1 for GitHub's `x-ratelimit-reset` and GitLab's `RateLimit-Reset`, 0.001 for Linear's milliseconds); 0 for a time
    already past, None when absent or unreadable; never above `MAX_RETRY_AFTER`."""
    if value is None:
        return None
    try:
        moment = float(value.strip()) * unit
    except ValueError:
        return None
    if not math.isfinite(moment):
        return None
    return min(max(moment - (now or datetime.now(UTC)).timestamp(), 0.0), MAX_RETRY_AFTER)


def answered_at(response: requests.Response) -> datetime | None:
    """The answer's own `Date`: a wait given as a moment counts from the target's clock, not ours, so a skew between
    the two clocks does not change the wait."""
    return http_date(response.headers.get("Date"))


def failure(exc: requests.RequestException, target: str, timeout: tuple[float, float]) -> TransportError:
    """The transient error for a call that got no answer. Only the exception's type is kept: its text quotes the URL."""
    if isinstance(exc, requests.Timeout):
        # The target may have acted before we stopped waiting: trying again makes delivery at least once.
        return TransportError(f"no answer from {target} within {timeout[1]:g} s (timed out)", permanent=False)
    if isinstance(exc, requests.ConnectionError):
        return TransportError(f"could not connect to {target} ({type(exc).__name__})", permanent=False)
    return TransportError(f"the request to {target} failed ({type(exc).__name__})", permanent=False)


def error_for(
    response: requests.Response,
    target: str,
    *,
    detail: str = "",
    retry_after: float | None = None,
    rate: RateLimit | None = None,
) -> TransportError | None:
    """The error an answer means, or None for a 2xx. `detail` (the target's own words, safe to show) is appended;
    `retry_after`, when given, replaces what the `Retry-After` header says (a module that knows better, as Discord's
    body does)."""
    status = response.status_code
    if 200 <= status < 300:
        return None
    if status == 429 or status >= 500:
        if retry_after is None:
            retry_after = parse_retry_after(response.headers.get("Retry-After"), now=answered_at(response))
        wait = f"; retry after {retry_after:g} s" if retry_after is not None else ""
        why = " (rate limited)" if status == 429 else ""
        text = f"{target} answered {status}{why}{detail}{wait}"
        return TransportError(text, permanent=False, retry_after=retry_after, status=status, rate=rate)
    if status in (401, 403):
        why = " (the credentials were refused)"
    elif 300 <= status < 400:
        why = " (a redirect, not followed)"
    else:
        why = ""
    return TransportError(f"{target} answered {status}{why}{detail}", permanent=True, status=status, rate=rate)


def send(
    session: requests.Session,
    method: str,
    url: str,
    *,
    target: str,
    timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    auth: requests.auth.AuthBase | None = None,
    **kwargs: Any,
) -> requests.Response:
    """One request, whatever its answer's status (for a module that reads its target's errors itself, then calls
    `error_for`); a call that got no answer raises the transient `TransportError`. A `301`/`307`/`308` to the same
    origin is followed, the same method and body again (at most `MAX_REDIRECTS` in a row); one to another origin
    raises a permanent `TransportError` and nothing is sent there. `kwargs` go to `requests` (`json`, `params`,
    `headers`, `data`)."""
    for _ in range(MAX_REDIRECTS + 1):
        try:
            response = session.request(method, url, timeout=timeout, auth=auth, allow_redirects=False, **kwargs)
        except requests.RequestException as exc:
            raise failure(exc, target, timeout) from None
        location = response.headers.get("Location") if response.status_code in FOLLOWED_REDIRECTS else None
        if not location:
            return response
        following = urljoin(url, location)
        if _origin(following) != _origin(url):
            raise TransportError(
                f"{target} answered {response.status_code} (a redirect to another host, not followed)",
                permanent=True,
                status=response.status_code,
            )
        response.close()
        if urlsplit(following).query:  # the new address carries its own query
            kwargs = {k: v for k, v in kwargs.items() if k != "params"}
        url = following
    raise TransportError(f"{target} redirected more than {MAX_REDIRECTS} times: not followed", permanent=True)


def call(
    session: requests.Session,
    method: str,
    url: str,
    *,
    target: str,
    timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    auth: requests.auth.AuthBase | None = None,
    tries: int = 1,
    budget: float = RETRY_BUDGET,
    read_error: Callable[[requests.Response], TransportError | None] | None = None,
    **kwargs: Any,
) -> requests.Response:
    """One HTTP call: the 2xx answer, or `TransportError`. With `tries` > 1 a transient failure is tried again in
    this process after the target's `Retry-After` (else a short pause that doubles), while the next try still
    starts within `budget` seconds; a permanent one is never tried again. An outbox handler leaves `tries` at 1:
    the outbox retries for it, across restarts. `read_error` (default `error_for`) is a module's own reading of an
    answer, for a target whose statuses say more than their number (GitHub's 403 that is a rate limit)."""
    started = time.monotonic()
    attempt = 1
    while True:
        try:
            response = send(session, method, url, target=target, timeout=timeout, auth=auth, **kwargs)
        except TransportError as exc:
            error = exc
        else:
            error = read_error(response) if read_error is not None else error_for(response, target)
            if error is None:
                return response
        pause = error.retry_after if error.retry_after is not None else RETRY_PAUSE * 2 ** (attempt - 1)
        if error.permanent or attempt >= tries or time.monotonic() - started + pause > budget:
            raise error
        time.sleep(pause)
        attempt += 1


class Pages:
    """GET `url` and each page its `Link: <...>; rel="next"` points to, one `call` each, at most `max_pages`; iterate
    it for the answers. `truncated` is True once the cap stopped it with a next page still to read: what that page
    held was never read, and a caller keeping a checkpoint must not move it past it.
    A next page on another origin (scheme, host, port) is a permanent error: the credential goes to the one origin
    the caller named. `kwargs` (such as `params`) apply to the first page only; a next link carries its own.
    `tries` and `read_error` are `call`'s, for each page."""

    def __init__(
        self,
        session: requests.Session,
        url: str,
        *,
        target: str,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        auth: requests.auth.AuthBase | None = None,
        max_pages: int = MAX_PAGES,
        tries: int = 1,
        read_error: Callable[[requests.Response], TransportError | None] | None = None,
        **kwargs: Any,
    ):
        self._session, self._url, self._target, self._timeout, self._auth = session, url, target, timeout, auth
        self._max_pages, self._tries, self._read_error, self._kwargs = max_pages, tries, read_error, kwargs
        self.truncated = False

    def __iter__(self) -> Iterator[requests.Response]:
        url, kwargs, origin = self._url, self._kwargs, _origin(self._url)
        for number in range(1, self._max_pages + 1):
            response = call(
                self._session,
                "GET",
                url,
                target=self._target,
                timeout=self._timeout,
                auth=self._auth,
                tries=self._tries,
                read_error=self._read_error,
                **kwargs,
            )
            yield response
            following = response.links.get("next", {}).get("url")
            if not following:
                return
            if number == self._max_pages:
                self.truncated = True
                return
            if _origin(following) != origin:
                raise TransportError(f"{self._target}'s next page is on another host: not followed", permanent=True)
            url, kwargs = following, {k: v for k, v in kwargs.items() if k != "params"}


def pages(session: requests.Session, url: str, **kwargs: Any) -> Pages:
    """`Pages(session, url, ...)`: the pages of a listing that the Link header pages."""
    return Pages(session, url, **kwargs)


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, parts.hostname, parts.port or _DEFAULT_PORTS.get(scheme)
