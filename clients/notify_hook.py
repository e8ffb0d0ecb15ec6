"""The writing notify hook: tells the service what a writing step of the content repository found.

    python notify_hook.py STATUS [--missing N] [--items JSON] [--idempotency-key KEY]
    svc notify STATUS [--missing N] [--items JSON]          (the same, when the service is installed)

This file depends on nothing but the standard library and `requests`, so it can be copied as it is into a
content repository (for example as `scripts/notify_hook.py`). That is also why it reads its own environment
variables, which everywhere else in the service only `domain/config.py` does:

| variable                                 | meaning                                                       |
|------------------------------------------|---------------------------------------------------------------|
| `SVC_CI_WEBHOOK_SECRET`                  | the shared CI secret, sent as `X-Svc-CI-Secret` (required)    |
| `SVC_WRITING_WEBHOOK_URL`                | the notify address (default `$SVC_BASE_URL` + the path below) |
| `SVC_BASE_URL`                           | where the service is (default `http://127.0.0.1:8080`)        |
| `SVC_WRITING_NOTIFY=0`, `WRITING_AUTOMATION=0` | do nothing and exit 0                                   |

Every call has a timeout. Connection errors, timeouts, 429 and 5xx answers are retried until an overall deadline
(`DEADLINE`, two minutes): after the pause the answer's `Retry-After` asks for (a database outage answers 503 with
one), else a growing pause (1, 2, 4 ... 30 s). Every try carries the same `Idempotency-Key`, so a report the
service recorded before the connection dropped still counts once.

Exit codes: 0 recorded (or the hook is switched off); 1 the service refused the report (wrong secret, invalid
body: retrying will not help); 2 bad arguments or configuration; 3 the service could not be reached or kept
failing (try again later).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import re
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import requests

OK, REFUSED, USAGE, UNREACHABLE = 0, 1, 2, 3

STATUS = re.compile(
    r"^(SKIP_ALL_CAUGHT_UP|BACKFILL_READY|STOP_NEED_TOPICS|SUCCESS|AUTOMATION_DISABLED|FAIL_[A-Z0-9_]+)$"
)
DEFAULT_BASE_URL = "http://127.0.0.1:8080"
NOTIFY_PATH = "/api/v1/agents/writing/notify"
CONFIG_PATH = "/api/v1/agents/writing/config"
CI_HEADER = "X-Svc-CI-Secret"
# (connect, read) seconds for each try.
TIMEOUT = (5.0, 20.0)
ATTEMPTS: int | None = None  # no limit on tries: the deadline bounds them
DEADLINE = 120.0  # seconds from the first try after which no other is started
BACKOFF = 1.0  # seconds before the 2nd try; doubled before each later one
MAX_PAUSE = 30.0
TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
OFF_VALUES = frozenset({"0", "false", "no", "off"})


class HookError(Exception):
    """A failure with the exit code it maps to."""

    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


@dataclass(frozen=True)
class Target:
    notify_url: str
    config_url: str
    secret: str


def disabled_by(environ: Mapping[str, str]) -> str | None:
    """The variable that switches the hook off, if one does."""
    for name in ("SVC_WRITING_NOTIFY", "WRITING_AUTOMATION"):
        if environ.get(name, "").strip().lower() in OFF_VALUES:
            return name
    return None


def target(environ: Mapping[str, str]) -> Target:
    """Where to report and with which secret, from the environment; raises HookError(USAGE) when unusable."""
    secret = environ.get("SVC_CI_WEBHOOK_SECRET", "").strip()
    if not secret:
        raise HookError(USAGE, "SVC_CI_WEBHOOK_SECRET is not set: the service refuses reports without the CI secret")
    base = (environ.get("SVC_BASE_URL", "").strip() or DEFAULT_BASE_URL).rstrip("/")
    notify_url = environ.get("SVC_WRITING_WEBHOOK_URL", "").strip() or base + NOTIFY_PATH
    if notify_url.rstrip("/").endswith(NOTIFY_PATH):
        config_url = notify_url.rstrip("/")[: -len(NOTIFY_PATH)] + CONFIG_PATH
    else:
        config_url = base + CONFIG_PATH
    for url in (notify_url, config_url):
        _check_url(url)
    return Target(notify_url, config_url, secret)


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise HookError(USAGE, f"not an http(s) URL: {url!r}")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        # The CI secret travels in a header: never in clear text over a network.
        raise HookError(USAGE, f"refusing to send the CI secret over plain http to {parts.hostname}; use https")


def _is_loopback(host: str) -> bool:
    # A copy of integrations.discord.is_loopback: this module is copied into content repositories and imports
    # nothing of ours.
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def notify(
    status: str,
    *,
    missing: int | None = None,
    items: list[dict[str, Any]] | None = None,
    environ: Mapping[str, str] | None = None,
    idempotency_key: str | None = None,
    attempts: int | None = ATTEMPTS,
    deadline: float = DEADLINE,
    backoff: float = BACKOFF,
    timeout: tuple[float, float] = TIMEOUT,
    log: TextIO | None = None,
) -> dict[str, Any] | None:
    """Send one report. Returns the service's answer, or None when the hook is switched off.

    Raises HookError with the exit code that fits (see the module docstring).
    """
    environ = os.environ if environ is None else environ
    off = disabled_by(environ)
    if off:
        _say(log, f"{off}=0: the writing notify hook is switched off; nothing sent")
        return None
    if not STATUS.match(status):
        raise HookError(
            USAGE,
            f"unknown status {status!r}: expected SKIP_ALL_CAUGHT_UP, BACKFILL_READY, STOP_NEED_TOPICS, SUCCESS, "
            "AUTOMATION_DISABLED or FAIL_<REASON> (capitals, digits, underscores)",
        )
    where = target(environ)
    body: dict[str, Any] = {"status": status}
    if missing is not None:
        body["missing"] = missing
    if items is not None:
        body["items"] = items
    key = idempotency_key or f"notify-{uuid.uuid4()}"
    return _call(
        "POST",
        where.notify_url,
        secret=where.secret,
        body=body,
        headers={"Idempotency-Key": key},
        attempts=attempts,
        deadline=deadline,
        backoff=backoff,
        timeout=timeout,
        log=log,
    )


def fetch_config(
    *,
    environ: Mapping[str, str] | None = None,
    attempts: int | None = ATTEMPTS,
    deadline: float = DEADLINE,
    backoff: float = BACKOFF,
    timeout: tuple[float, float] = TIMEOUT,
    log: TextIO | None = None,
) -> dict[str, Any]:
    """`GET agents/writing/config`: whether automation is on, the poll schedule, the site URL."""
    environ = os.environ if environ is None else environ
    where = target(environ)
    return _call(
        "GET",
        where.config_url,
        secret=where.secret,
        attempts=attempts,
        deadline=deadline,
        backoff=backoff,
        timeout=timeout,
        log=log,
    )


def _call(
    method: str,
    url: str,
    *,
    secret: str,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    attempts: int | None,
    deadline: float,
    backoff: float,
    timeout: tuple[float, float],
    log: TextIO | None,
) -> dict[str, Any]:
    all_headers = {CI_HEADER: secret, "Accept": "application/json", **(headers or {})}
    problem = "no attempt made"
    give_up_at = time.monotonic() + deadline
    attempt = 0
    with requests.Session() as session:
        while True:
            attempt += 1
            pause = min(backoff * 2 ** (attempt - 1), MAX_PAUSE) * random.uniform(1.0, 1.25)  # noqa: S311 (jitter)
            # A try never runs past the deadline either (but gets a second at least).
            read = min(timeout[1], max(give_up_at - time.monotonic(), 1.0))
            try:
                # Never follow a redirect: requests would carry the X-Svc-CI-Secret header to wherever it points.
                response = session.request(
                    method, url, json=body, headers=all_headers, timeout=(timeout[0], read), allow_redirects=False
                )
            except requests.Timeout:
                problem = f"no answer within {read:g}s"
            except requests.ConnectionError:
                problem = f"could not connect to {_host(url)}"
            else:
                if 200 <= response.status_code < 300:
                    return _json(response) or {}
                detail = _problem_detail(response)
                if response.status_code not in TRANSIENT_STATUSES:
                    raise HookError(REFUSED, _refusal(response.status_code, detail))
                problem = f"the service answered {response.status_code}{': ' + detail if detail else ''}"
                asked = _retry_after(response)
                if asked is not None:
                    pause = asked  # the service says when: a database outage, a rate limit
            left = give_up_at - time.monotonic()
            if attempts is not None and attempt >= attempts:
                break
            if pause > left:
                problem += f" (the next try, in {pause:.1f}s, would be past the {deadline:g}s deadline)"
                break
            _say(log, f"try {attempt} failed ({problem}); trying again in {pause:.1f}s ({left:.0f}s left)")
            time.sleep(pause)
    raise HookError(UNREACHABLE, f"gave up after {attempt} tries: {problem}")


def _refusal(status: int, detail: str) -> str:
    if status == 401:
        return "the service refused the CI secret (401): check SVC_CI_WEBHOOK_SECRET"
    if status == 404:
        return "no notify endpoint there (404): check SVC_WRITING_WEBHOOK_URL or SVC_BASE_URL"
    return f"the service refused the report ({status}){': ' + detail if detail else ''}"


def _problem_detail(response: requests.Response) -> str:
    document = _json(response)
    if not isinstance(document, dict):
        return ""
    text = str(document.get("detail") or document.get("title") or "")
    errors = document.get("errors")
    if isinstance(errors, list) and errors:
        text += " — " + "; ".join(f"{e.get('path') or '/'}: {e.get('message')}" for e in errors[:10])
    return text[:1000]


def _retry_after(response: requests.Response) -> float | None:
    try:
        return max(float(response.headers.get("Retry-After", "")), 0.0)
    except ValueError:
        return None


def _json(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _host(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _say(log: TextIO | None, message: str) -> None:
    print(f"notify: {message}", file=log or sys.stderr, flush=True)


# -- the command line -----------------------------------------------------------------------------------------


def _items(text: str) -> list[dict[str, Any]]:
    """`--items`: a JSON array, or `@file` holding one."""
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]}: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise argparse.ArgumentTypeError("expected a JSON array of objects")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("status", metavar="STATUS", help="SKIP_ALL_CAUGHT_UP, BACKFILL_READY, STOP_NEED_TOPICS, "
                        "SUCCESS, AUTOMATION_DISABLED or FAIL_<REASON>")  # fmt: skip
    parser.add_argument("--missing", type=_count, help="how many articles are missing")
    parser.add_argument(
        "--items",
        type=_items,
        metavar="JSON",
        help='the affected articles: a JSON array of {"date", "slug", "title", "url"}, or @file',
    )
    parser.add_argument(
        "--idempotency-key",
        help="the report's key (default: a new one per run); the same key again counts once",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=DEADLINE,
        help=f"seconds to keep retrying a service that is down or busy (default {DEADLINE:g})",
    )
    parser.add_argument("--attempts", type=int, default=ATTEMPTS, help="tries before giving up (default: no limit)")


def run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Run the hook for parsed `args`; print the outcome; return the exit code."""
    try:
        answer = notify(
            args.status,
            missing=args.missing,
            items=args.items,
            environ=environ,
            idempotency_key=args.idempotency_key,
            attempts=args.attempts,
            deadline=args.deadline,
        )
    except HookError as exc:
        _say(None, str(exc))
        return exc.code
    if answer is None:
        return OK
    print(describe(args.status, answer), flush=True)
    return OK


def describe(status: str, answer: dict[str, Any]) -> str:
    """One line saying what the service did with the report."""
    ticket = answer.get("ticket") or {}
    where = ticket.get("stage", "?")
    if ticket.get("waiting_on"):
        where += f", waiting on {ticket['waiting_on']}"
    line = f"notify: {status} recorded on {ticket.get('key', 'the writing ticket')} ({where})"
    if ticket.get("link"):
        line += f", linked to {ticket['link']}"
    line += "; chat post queued" if answer.get("chat") == "queued" else "; no chat post"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="notify_hook", description="Report a writing status to the service.")
    add_arguments(parser)
    return run(parser.parse_args(argv), os.environ)


if __name__ == "__main__":
    sys.exit(main())
