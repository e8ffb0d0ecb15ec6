"""Shared by the router's tests: the examples, signed webhook requests, and a board the gates can pass on."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import uuid as uuid_module
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# Each forge sender's own credential, as the examples' .http files are signed with them.
GITHUB_SECRET = "github-secret-0123456789abcdef"
GITLAB_TOKEN = "gitlab-token-0123456789abcdef"
# An older install's one value for both (SVC_FORGE_WEBHOOK_SECRET).
FORGE_SECRET = "forge-secret-0123456789abcdef"
TRACKER_SECRET = "tracker-secret-0123456789abcdef"
ALLOWLIST = frozenset(
    {
        "svc:ada",
        "svc:admin",
        "svc:poller",
        "svc:ci",
        "github:svc-coder[bot]",
        "github:mona",
        "github:github-actions",
        "gitlab:gitlab-ci",
        "gitlab:project_15_bot_4f1c2a",
        "gitlab:ada",
        "linear:6d3a8c8e-3b1f-4b9e-a2c4-9f7d1e2b3c4d",
    }
)


def example(relative: str) -> dict[str, Any]:
    return json.loads((EXAMPLES / relative).read_text())


def raw_example(relative: str) -> bytes:
    return (EXAMPLES / relative).read_bytes()


def hmac_hex(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def github_headers(event: str, delivery: str, body: bytes, secret: str = GITHUB_SECRET) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Hook-ID": "467123908",
        "User-Agent": "GitHub-Hookshot/7f3a2b1",
        "X-Hub-Signature-256": "sha256=" + hmac_hex(secret, body),
    }


def gitlab_headers(
    event: str, uuid: str, token: str = GITLAB_TOKEN, *, idempotency_key: str | None = None
) -> dict[str, str]:
    """GitLab's delivery headers; `idempotency_key` None is a GitLab older than 17.4, which sends none."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitLab/17.5.0",
        "X-Gitlab-Event": event,
        "X-Gitlab-Webhook-UUID": str(uuid_module.uuid4()),  # new on every request, retries included
        "X-Gitlab-Instance": "https://gitlab.example.com",
        "X-Gitlab-Event-UUID": uuid,
        "X-Gitlab-Token": token,
    }
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    return headers


def linear_ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


_LINEAR_STAMP = re.compile(rb'("webhookTimestamp":\s*)[0-9]+')


def linear_body(relative: str, *, at: datetime) -> bytes:
    """A Linear example as Linear would send it at `at`: its signed webhookTimestamp set to that moment, every
    other byte as in the file."""
    raw = raw_example(relative)
    stamped, count = _LINEAR_STAMP.subn(lambda m: m.group(1) + str(linear_ms(at)).encode(), raw)
    assert count == 1, f"{relative} has no webhookTimestamp to set"
    return stamped


@dataclass(frozen=True)
class HttpRequest:
    title: str
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


def http_requests(relative: str) -> list[HttpRequest]:
    """The requests of an `.http` file of `examples/` (requests separated by `###` lines, `#` comments before a
    request line, a body inline or `< file` relative to the .http file)."""
    path = EXAMPLES / relative
    requests = []
    blocks = re.split(r"^###", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
    for index, block in enumerate(blocks):
        # What follows a `###` on its line is the request's title; the first block has none.
        title, _, rest = block.partition("\n") if index else ("", "", block)
        lines = rest.split("\n")
        while lines and (not lines[0].strip() or lines[0].startswith("#")):
            lines.pop(0)
        if not lines:
            continue
        method, target, _ = lines.pop(0).split(" ", 2)
        headers = {}
        while lines and lines[0].strip():
            name, _, value = lines.pop(0).partition(":")
            headers[name.strip()] = value.strip()
        text = "\n".join(lines[1:]).rstrip("\n")
        body = (path.parent / text[2:].strip()).read_bytes() if text.startswith("< ") else text.encode("utf-8")
        requests.append(HttpRequest(title.strip(), method, target, headers, body))
    return requests


def linear_headers(delivery: str, body: bytes, secret: str = TRACKER_SECRET) -> dict[str, str]:
    return {
        "Content-Type": "application/json; charset=utf-8",
        "Linear-Delivery": delivery,
        "Linear-Event": "Issue",
        "User-Agent": "Linear-Webhook",
        "Linear-Signature": hmac_hex(secret, body),
    }


def seed_board(api, *, tickets: dict[str, str], initiative_stage: str = "active") -> None:
    """Initiative `portfolio` at `initiative_stage` and the given tickets (key -> stage) in it."""
    assert api.post("/api/v1/initiatives", json={"id": "portfolio", "name": "Portfolio"}).status_code == 201
    if initiative_stage != "agree":
        api.patch("/api/v1/initiatives/portfolio", json={"stage": initiative_stage})
    for key, stage in tickets.items():
        body = {"key": key, "initiative_id": "portfolio", "title": f"Ticket {key}", "stage": stage}
        if key == "PORT-12":  # the Linear issue of the payload examples
            body["tracker_issue_id"] = "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9"
        created = api.post("/api/v1/tickets", json=body)
        assert created.status_code == 201, created.text


def gate(decision: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in decision["gates"] if g["gate"] == name)
