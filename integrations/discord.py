"""Discord, through an incoming webhook: the only module that speaks to Discord.

One call, Execute Webhook (`POST /webhooks/{id}/{token}?wait=true`), with a JSON body
`{"content": ..., "allowed_mentions": {"parse": []}}`: plain text of at most 2000 characters that can never
ping anyone. `wait=true` makes Discord answer 200 with the created message only once it is saved, so a
message Discord dropped is an error here instead of a silent 204.

Each answer is classified by `integrations/transport.py`, the same way as every other target's: a 2xx is
`Posted`; anything else raises `TransportError`: transient (5xx, a connection error, a timeout; 429, with
`retry_after` from Discord's JSON body, in seconds and possibly fractional, else its `Retry-After` header) or
permanent (404: the webhook was deleted; any other 4xx). The `X-RateLimit-*` headers of every answer are read into a
`RateLimit`, on the success and on the error alike, so the caller can pace itself instead of hard-coding Discord's
limits.

The webhook URL carries its token, so it never appears in what this module returns or logs: the target is
shown as `https://discord.com/api/webhooks/<id>/…`, and exception texts (which quote the URL) are never
passed on.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests

from integrations import transport
from integrations.transport import RateLimit

MAX_CONTENT = 2000
# (connect, read) seconds: every call is bounded, a hung Discord never holds the jobs process.
DEFAULT_TIMEOUT = (5.0, 15.0)
# A 429 without a usable retry_after waits this long (the outbox keeps the message, nothing is lost by asking again
# later); a longer one is capped at transport.MAX_RETRY_AFTER.
DEFAULT_RETRY_AFTER = 5.0
USER_AGENT = "svc-delivery/1 (chat)"


@dataclass(frozen=True)
class Posted:
    """A message Discord saved, and what the answer's rate-limit headers said."""

    detail: str
    status: int
    rate: RateLimit = field(default_factory=RateLimit)
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
        self.session = session or transport.session(USER_AGENT)

    def execute(self, content: str) -> Posted:
        """Post `content`: `Posted`, or `TransportError` (with the answer's `rate` when there was one)."""
        # The target named in errors is the URL without its token.
        response = transport.send(
            self.session, "POST", self._url, target=self.target, timeout=self.timeout, json=payload(content)
        )
        return classify(response)


def classify(response: requests.Response) -> Posted:
    """A 2xx as `Posted`; anything else raised as the `TransportError` it means."""
    rate = _rate_limit(response)
    code = response.status_code
    if 200 <= code < 300:
        body = _json(response) if code == 200 else None
        message_id = str(body["id"]) if isinstance(body, dict) and "id" in body else None
        detail = f"Discord message {message_id}" if message_id else f"Discord answered {code}"
        return Posted(detail, code, rate, message_id)
    if code == 429:
        detail, wait = (" (global)" if rate.is_global else ""), _retry_after(response)
    elif code == 404:
        detail, wait = f": the webhook does not exist (deleted?){_discord_error(response)}", None
    else:
        detail, wait = _discord_error(response), None
    raise transport.error_for(response, "Discord", detail=detail, retry_after=wait, rate=rate)


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
    """A 429's wait: Discord's JSON `retry_after` (fractional seconds), else `Retry-After`, else the bucket's reset."""
    body = _json(response)
    wait = None
    if isinstance(body, dict) and isinstance(body.get("retry_after"), int | float):
        wait = _number(str(body["retry_after"]))
    if wait is None:
        wait = transport.parse_retry_after(response.headers.get("Retry-After"))
    if wait is None:
        wait = _number(response.headers.get("X-RateLimit-Reset-After"))
    return min(wait if wait is not None else DEFAULT_RETRY_AFTER, transport.MAX_RETRY_AFTER)


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
