"""The ops runner: `svc ops pulse|digest|slot-steward|idle-reclaim` calls the matching ops endpoint of a
running service, with the basic credentials of `SVC_BASIC_AUTH`, at `SVC_BASE_URL`.

For a laptop, or a CI cron in place of `svc jobs` (see examples/ci/). It prints the service's answer as
JSON on standard output and a one-line summary on standard error, and exits 0 only when the service did
the job: 1 when the call was refused or failed, 2 when it could not be made at all (no credentials).
Standard library and `requests` only: it imports nothing of the service's (the `svc` command hands it the base
URL and the credentials).
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

import requests

ENDPOINTS = {
    "pulse": "/api/v1/ops/pulse",
    "digest": "/api/v1/ops/weekly-digest",
    "slot-steward": "/api/v1/ops/slot-steward",
    "idle-reclaim": "/api/v1/ops/idle-reclaim",
}
DEFAULT_TIMEOUT = 600.0  # a pulse waits for its slot steward's bay wipes
OK, FAILED, UNUSABLE = 0, 1, 2


def run(
    job: str,
    base_url: str,
    basic_auth: str | None,
    *,
    post_to_chat: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Call the endpoint for `job` of the service at `base_url` with `basic_auth` (`user:password`); return the exit
    code."""
    if post_to_chat is not None and job != "pulse":
        print("svc ops: --post-to-chat applies to the pulse only", file=err)
        return UNUSABLE
    if not basic_auth or ":" not in basic_auth:
        print("svc ops: SVC_BASIC_AUTH is not set (user:password of the service's basic credentials)", file=err)
        return UNUSABLE
    auth = tuple(basic_auth.split(":", 1))
    url = base_url.rstrip("/") + ENDPOINTS[job]
    body: dict[str, Any] = {}
    if post_to_chat is not None:
        body["post_to_chat"] = post_to_chat
    try:
        response = requests.post(url, json=body, auth=auth, timeout=(10, timeout), allow_redirects=False)
    except requests.Timeout:
        print(f"svc ops: no answer from {url} within {timeout:g} s", file=err)
        return FAILED
    except requests.ConnectionError as exc:
        print(f"svc ops: cannot reach {url} ({_reason(exc)}); is the service running at SVC_BASE_URL?", file=err)
        return FAILED
    except requests.RequestException as exc:
        print(f"svc ops: the call to {url} failed: {type(exc).__name__}", file=err)
        return FAILED

    try:
        answer = response.json()
    except ValueError:
        answer = None
    if response.status_code != 200:
        print(f"svc ops: {_refusal(url, response, answer)}", file=err)
        return FAILED
    if not isinstance(answer, dict):
        print(f"svc ops: {url} answered 200 but not with a JSON object", file=err)
        return FAILED
    print(json.dumps(answer, indent=2, ensure_ascii=False), file=out)
    print(f"svc ops {job}: {_summary(job, answer)}", file=err)
    return OK


def _refusal(url: str, response: requests.Response, answer: Any) -> str:
    status = response.status_code
    detail = answer.get("detail") if isinstance(answer, dict) else None
    if status == 401:
        return f"refused: {url} answered 401; the credentials in SVC_BASIC_AUTH are not the service's"
    if status == 429:
        wait = response.headers.get("Retry-After", "?")
        return f"refused: {url} answered 429 (too many failed credentials from here); retry after {wait} s"
    return f"{url} answered {status}" + (f": {detail}" if detail else "")


def _summary(job: str, answer: dict[str, Any]) -> str:
    run = answer.get("run") or {}
    tail = f"run {run.get('id')} {run.get('status')}"
    if job == "pulse":
        issues = answer.get("issues") or []
        released = (answer.get("steward") or {}).get("released") or []
        posted = "posted to chat" if answer.get("posted") else "not posted"
        return f"{len(issues)} issue(s), {posted}, {len(released)} slot(s) released; {tail}"
    if job == "digest":
        return f"digest queued for chat; {tail}"
    if job == "slot-steward":
        return f"{len(answer.get('released') or [])} slot(s) released; {tail}"
    return f"{len(answer.get('wiped') or [])} bay(s) wiped; {tail}"


def _reason(exc: requests.ConnectionError) -> str:
    text = str(exc)
    for known in ("Connection refused", "Name or service not known", "No route to host", "timed out"):
        if known in text:
            return known.lower()
    return type(exc).__name__
