"""Discord, through an incoming webhook: the only module that speaks to Discord.

One call, Execute Webhook (`POST /webhooks/{id}/{token}?wait=true`), with a JSON body
`{"content": ..., "allowed_mentions": {"parse": []}}`: plain text of at most 2000 characters that can never
ping anyone. `wait=true` makes Discord answer 200 with the created message only once it is saved, so a
message Discord dropped is an error here instead of a silent 204.

Each answer is classified for the outbox (see `jobs/chat_delivery.py`): sent; rate limited (429, with `retry_after`
from the JSON body, in seconds and possibly fractional, or the `Retry-After` header); transient (5xx, a
connection error, a timeout); or permanent (404: the webhook was deleted; any other 4xx). The
`X-RateLimit-*` headers of every answer are read and handed back so the caller can pace itself instead of
hard-coding Discord's limits.

The webhook URL carries its token, so it never appears in what this module returns or logs: the target is
shown as `https://discord.com/api/webhooks/<id>/…`, and exception texts (which quote the URL) are never
passed on.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests

MAX_CONTENT = 2000
# (connect, read) seconds: every call is bounded, a hung Discord never holds the jobs process.
DEFAULT_TIMEOUT = (5.0, 15.0)
# A 429 without a usable retry_after waits this long; a retry_after above the cap is capped (the outbox
# keeps the message, nothing is lost by asking again later).
DEFAULT_RETRY_AFTER = 5.0
MAX_RETRY_AFTER = 3600.0

SENT, RATE_LIMITED, TRANSIENT, PERMANENT = "sent", "rate_limited", "transient", "permanent"


@dataclass(frozen=True)
class RateLimit:
    """What the `X-RateLimit-*` headers of one answer said (None when a header was absent or unreadable)."""

    limit: int | None = None
    remaining: int | None = None
    reset_after: float | None = None
    bucket: str | None = None
    scope: str | None = None
    is_global: bool = False


@dataclass(frozen=True)
class PostResult:
    kind: str  # SENT, RATE_LIMITED, TRANSIENT or PERMANENT
    detail: str
    status_code: int | None = None
    retry_after: float | None = None
    rate: RateLimit = RateLimit()
    message_id: str | None = None


def payload(content: str) -> dict:
    """The Execute Webhook body: the content, cut to Discord's limit, with every mention disabled."""
    content = content.strip() or "(empty message)"
    if len(content) > MAX_CONTENT:
        content = content[: MAX_CONTENT - 2].rstrip() + " …"
    return {"content": content, "allowed_mentions": {"parse": []}}


def check_url(url: str) -> None:
    """Refuse a webhook URL that is not https (or plain http to this machine, for tests and local relays)."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return
    raise ValueError(f"the chat webhook URL must be https (or http to a loopback address), got {shown(url)}")


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback IP address: where plain http may carry a token."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def shown(url: str) -> str:
    """The URL as it may appear in logs and errors: scheme, host and webhook id, never the token."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if "webhooks" in segments and segments.index("webhooks") + 1 < len(segments):
        webhook_id = segments[segments.index("webhooks") + 1]
        return f"{parts.scheme}://{parts.hostname}/…/webhooks/{webhook_id}/…"
    return f"{parts.scheme}://{parts.hostname}/…"


class DiscordWebhook:
    """One Discord incoming webhook."""

    def __init__(
        self,
        url: str,
        *,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        session: requests.Session | None = None,
    ):
        check_url(url)
        self._url = _with_wait(url)
        self.target = shown(url)
        self.timeout = timeout
        self.session = session or requests.Session()

    def execute(self, content: str) -> PostResult:
        """Post `content`; never raises for anything the network or Discord does."""
        try:
            response = self.session.post(self._url, json=payload(content), timeout=self.timeout, allow_redirects=False)
        except requests.Timeout:
            # Discord may have created the message before we stopped waiting: trying again is at least once.
            return PostResult(TRANSIENT, f"no answer from Discord within {self.timeout[1]:g}s (timed out)")
        except requests.ConnectionError:
            return PostResult(TRANSIENT, f"could not connect to {self.target}")
        except requests.RequestException as exc:  # the exception's text quotes the URL: only its type leaves
            return PostResult(TRANSIENT, f"request to {self.target} failed ({type(exc).__name__})")
        return classify(response)


def classify(response: requests.Response) -> PostResult:
    code = response.status_code
    rate = _rate_limit(response)
    if code in (200, 204):
        message_id = None
        if code == 200:
            body = _json(response)
            message_id = str(body["id"]) if isinstance(body, dict) and "id" in body else None
        detail = f"Discord message {message_id}" if message_id else f"Discord answered {code}"
        return PostResult(SENT, detail, code, rate=rate, message_id=message_id)
    if code == 429:
        wait = _retry_after(response)
        scope = " (global)" if rate.is_global else ""
        return PostResult(
            RATE_LIMITED, f"429 rate limited{scope}; retry after {wait:g}s", code, retry_after=wait, rate=rate
        )
    if code >= 500:
        return PostResult(TRANSIENT, f"Discord answered {code}{_discord_error(response)}", code, rate=rate)
    if code == 404:
        return PostResult(
            PERMANENT, f"404: the webhook does not exist (deleted?){_discord_error(response)}", code, rate=rate
        )
    return PostResult(PERMANENT, f"Discord refused the message: {code}{_discord_error(response)}", code, rate=rate)


def _with_wait(url: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "wait"]
    query.append(("wait", "true"))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def _json(response: requests.Response):
    try:
        return response.json()
    except ValueError:
        return None


def _discord_error(response: requests.Response) -> str:
    """Discord's own `{"message", "code"}`, when it sent one (it never contains the token)."""
    body = _json(response)
    if not isinstance(body, dict) or "message" not in body:
        return ""
    code = f", code {body['code']}" if "code" in body else ""
    return f" ({str(body['message'])[:200]}{code})"


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _retry_after(response: requests.Response) -> float:
    body = _json(response)
    wait = None
    if isinstance(body, dict) and isinstance(body.get("retry_after"), int | float):
        wait = _number(str(body["retry_after"]))
    if wait is None:
        wait = _number(response.headers.get("Retry-After"))
    if wait is None:
        wait = _number(response.headers.get("X-RateLimit-Reset-After"))
    if wait is None:
        wait = DEFAULT_RETRY_AFTER
    return min(wait, MAX_RETRY_AFTER)


def _rate_limit(response: requests.Response) -> RateLimit:
    headers = response.headers
    limit = _number(headers.get("X-RateLimit-Limit"))
    remaining = _number(headers.get("X-RateLimit-Remaining"))
    body = _json(response) if response.status_code == 429 else None
    return RateLimit(
        limit=int(limit) if limit is not None else None,
        remaining=int(remaining) if remaining is not None else None,
        reset_after=_number(headers.get("X-RateLimit-Reset-After")),
        bucket=headers.get("X-RateLimit-Bucket"),
        scope=headers.get("X-RateLimit-Scope"),
        is_global=headers.get("X-RateLimit-Global", "").lower() == "true"
        or (isinstance(body, dict) and body.get("global") is True),
    )
