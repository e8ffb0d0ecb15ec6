"""GitHub's REST API, outbound (its webhooks, inbound: `domain/router/senders/github.py`): the webhook deliveries of
a repository's or an organization's hook, listed newest first, and a redelivery of one. One module for GitHub's
API: the forge writes (pull requests, comments) belong here too.

A hook is named by its API path, `repos/{owner}/{repo}/hooks/{hook_id}` or `orgs/{org}/hooks/{hook_id}`. Its
deliveries (`GET {hook}/deliveries?per_page=100`, GitHub keeps three days of them) come newest first, paged by an
opaque `cursor` that the `Link: <…>; rel="next"` header carries; each is `{id, guid, delivered_at, redelivery,
duplicate, status, status_code, event, action, ...}`, where `guid` is the `X-GitHub-Delivery` every attempt of
one event carries and `status_code` 0 means no answer. `POST {hook}/deliveries/{id}/attempts` asks GitHub to
deliver it again (202).

Failures are `TransportError`s (`integrations/transport.py`), read as GitHub means them: a 403 or 429 that says
its rate limit is spent (`Retry-After`, or `x-ratelimit-remaining: 0` with `x-ratelimit-reset`) is transient,
with the wait; any other 401/403 is a refused token, 404 an unknown hook (or one the token may not see), 400/422
a bad cursor or request: permanent. The token goes as `Authorization: Bearer`, never into an error's text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import requests

from integrations import transport
from integrations.transport import TransportError

TARGET = "GitHub"
USER_AGENT = "svc-delivery/1 (github)"
API_VERSION = "2022-11-28"
PER_PAGE = 100
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


@dataclass
class DeliveryLog:
    """What one reading of a hook's deliveries found: the deliveries since the moment asked for, newest first,
    and the records that could not be read (each described, none of them a token)."""

    deliveries: list[HookDelivery] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)


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
        pages until a page reaches back past `since` (or `max_pages`). Raises `TransportError` when a page cannot
        be had or is not a list of deliveries; a record that cannot be read is described in `malformed`."""
        log = DeliveryLog()
        for number, page in enumerate(self._pages(f"{hook}/deliveries", params={"per_page": PER_PAGE}), start=1):
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
                break
        return log

    def redeliver(self, hook: str, delivery_id: int) -> None:
        """Ask GitHub to deliver `delivery_id` of `hook` again (it answers 202 and delivers it soon after)."""
        self._call("POST", f"{hook}/deliveries/{int(delivery_id)}/attempts", tries=1)

    # -- one call ---------------------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self.api_url}/{path.lstrip('/')}"

    def _call(self, method: str, path: str, *, tries: int | None = None, **kwargs: Any) -> requests.Response:
        return transport.call(
            self.session,
            method,
            self._url(path),
            target=TARGET,
            timeout=self.timeout,
            auth=self.auth,
            tries=self.tries if tries is None else tries,
            budget=self.budget,
            read_error=error_for,
            **kwargs,
        )

    def _pages(self, path: str, **kwargs: Any) -> Iterator[requests.Response]:
        return transport.pages(
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
    """GitHub's answer as a `TransportError` (None for a 2xx). A 403 or 429 is a rate limit when GitHub says so:
    a `Retry-After` (the secondary limits), or no requests remaining until `x-ratelimit-reset` (epoch seconds)."""
    status = response.status_code
    if status in (403, 429):
        retry_after = transport.parse_retry_after(response.headers.get("Retry-After"))
        remaining = response.headers.get("x-ratelimit-remaining")
        if retry_after is None and remaining == "0":
            retry_after = _until_reset(response)
        if retry_after is not None or remaining == "0" or status == 429:
            wait = f"; retry after {retry_after:g} s" if retry_after is not None else ""
            return TransportError(
                f"{TARGET} answered {status} (rate limited){wait}",
                permanent=False,
                retry_after=retry_after,
                status=status,
            )
    detail = ""
    if status in (404,):
        detail = " (no such hook, or the token may not see it)"
    elif status in (400, 422):
        detail = " (the request or its cursor was refused)"
    return transport.error_for(response, TARGET, detail=detail)


def _until_reset(response: requests.Response) -> float | None:
    try:
        reset = float(response.headers.get("x-ratelimit-reset", ""))
    except ValueError:
        return None
    now = datetime.now(UTC).timestamp()
    return min(max(reset - now, 0.0), transport.MAX_RETRY_AFTER)


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


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 time with its zone (`2026-11-24T10:00:00Z`) as aware UTC, else None."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else None
