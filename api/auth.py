"""The credential schemes: the shared CI secret header, HTTP basic, and the webhook signatures of the forge
(GitHub's HMAC-SHA256 of the raw body, GitLab's token) and the tracker (Linear's HMAC-SHA256 of the raw body).
Every secret is compared in constant time; a scheme whose secret is not configured refuses every request.

Failed credentials are counted per client address: after `FAILURE_LIMIT` failures within `WINDOW` seconds,
that address gets 429 with `Retry-After` until the window has passed. The count lives in this process.
A correctly signed delivery outside its sender's replay window is refused later, when the router reads it
(401 `stale-delivery`), and is not counted here: `api/errors.py` says why.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import falcon

from api.errors import Problem
from api.operations import BASIC, CI, CI_OR_BASIC, FORGE_SIGNATURE, PUBLIC, TRACKER_SIGNATURE
from svc.config import Config

CI_HEADER = "X-Svc-CI-Secret"
GITHUB_SIGNATURE_HEADER = "X-Hub-Signature-256"
GITLAB_TOKEN_HEADER = "X-Gitlab-Token"  # noqa: S105 (a header name, not a secret)
LINEAR_SIGNATURE_HEADER = "Linear-Signature"
REALM = 'Basic realm="svc", charset="UTF-8"'
FAILURE_LIMIT = 10
WINDOW = 60.0


@dataclass(frozen=True)
class Identity:
    """Who made the request: `actor` goes onto timelines and audit entries."""

    scheme: str
    actor: str


def equal(given: str | bytes, expected: str | bytes) -> bool:
    """Constant-time comparison of two secrets."""
    given_b = given.encode() if isinstance(given, str) else given
    expected_b = expected.encode() if isinstance(expected, str) else expected
    return hmac.compare_digest(given_b, expected_b)


class FailedCredentials:
    """Per-address sliding window of credential failures."""

    def __init__(
        self, *, limit: int = FAILURE_LIMIT, window: float = WINDOW, monotonic: Callable[[], float] = time.monotonic
    ):
        self.limit = limit
        self.window = window
        self.monotonic = monotonic
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def retry_after(self, address: str) -> int | None:
        """Seconds until `address` may try again, or None when it is not locked out."""
        now = self.monotonic()
        with self._lock:
            failures = self._failures.get(address)
            if not failures:
                return None
            while failures and now - failures[0] >= self.window:
                failures.popleft()
            if not failures:
                del self._failures[address]
                return None
            if len(failures) < self.limit:
                return None
            return max(1, math.ceil(self.window - (now - failures[0])))

    def record(self, address: str) -> None:
        now = self.monotonic()
        with self._lock:
            failures = self._failures.setdefault(address, deque())
            failures.append(now)
            while len(failures) > self.limit:
                failures.popleft()
            if len(self._failures) > 100_000:  # a flood of addresses must not grow memory without bound
                self._failures.pop(next(iter(self._failures)))


class Authenticator:
    def __init__(self, config: Config, failures: FailedCredentials):
        self.ci_secret = config.ci_webhook_secret
        self.basic = config.basic_auth
        self.basic_user = config.basic_user
        self.forge_secret = config.forge_webhook_secret
        self.tracker_secret = config.tracker_webhook_secret
        self.failures = failures

    def check(self, req: falcon.Request, scheme: str) -> Identity:
        """Identify the request under `scheme` or raise 401 (429 while the client is locked out)."""
        if scheme == PUBLIC:
            return Identity(PUBLIC, "anonymous")
        address = req.remote_addr or "unknown"
        wait = self.failures.retry_after(address)
        if wait is not None:
            raise Problem(
                429,
                "too-many-requests",
                "too many failed credentials from this address; wait and retry",
                headers={"Retry-After": str(wait)},
            )
        identity = self._identify(req, scheme)
        if identity is None:
            self.failures.record(address)
            headers = {"WWW-Authenticate": REALM} if scheme in {BASIC, CI_OR_BASIC} else None
            raise Problem(401, "unauthorized", _what_is_needed(scheme), headers=headers)
        return identity

    def _identify(self, req: falcon.Request, scheme: str) -> Identity | None:
        if scheme == FORGE_SIGNATURE:
            return self._forge(req)
        if scheme == TRACKER_SIGNATURE:
            return self._tracker(req)
        if scheme in {CI, CI_OR_BASIC}:
            given = req.get_header(CI_HEADER)
            if given is not None and self.ci_secret and equal(given, self.ci_secret):
                return Identity(CI, "ci")
        if scheme in {BASIC, CI_OR_BASIC}:
            user = self._basic_user(req)
            if user is not None:
                return Identity(BASIC, user)
        return None

    def _forge(self, req: falcon.Request) -> Identity | None:
        """GitHub signs the raw body (`X-Hub-Signature-256: sha256=<hex>`); GitLab sends the key itself."""
        if not self.forge_secret:
            return None
        signature = req.get_header(GITHUB_SIGNATURE_HEADER)
        if signature is not None:
            expected = "sha256=" + hmac_sha256_hex(self.forge_secret, _raw_body(req))
            return Identity(FORGE_SIGNATURE, "github") if equal(signature.strip().lower(), expected) else None
        token = req.get_header(GITLAB_TOKEN_HEADER)
        if token is not None and equal(token, self.forge_secret):
            return Identity(FORGE_SIGNATURE, "gitlab")
        return None

    def _tracker(self, req: falcon.Request) -> Identity | None:
        """Linear signs the raw body: `Linear-Signature: <hex HMAC-SHA256>`."""
        signature = req.get_header(LINEAR_SIGNATURE_HEADER)
        if not self.tracker_secret or signature is None:
            return None
        expected = hmac_sha256_hex(self.tracker_secret, _raw_body(req))
        return Identity(TRACKER_SIGNATURE, "linear") if equal(signature.strip().lower(), expected) else None

    def _basic_user(self, req: falcon.Request) -> str | None:
        header = req.get_header("Authorization")
        if not header or not self.basic:
            return None
        kind, _, token = header.partition(" ")
        if kind.lower() != "basic" or not token:
            return None
        try:
            given = base64.b64decode(token.strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
        if not equal(given, self.basic.encode()):
            return None
        return self.basic_user


def hmac_sha256_hex(secret: str, body: bytes) -> str:
    """The hex HMAC-SHA256 of `body` under `secret`, as GitHub and Linear sign webhook deliveries."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _raw_body(req: falcon.Request) -> bytes:
    # The guard reads the exact bytes before credentials are checked for operations declared raw_body.
    return getattr(req.context, "raw_body", None) or b""


def _what_is_needed(scheme: str) -> str:
    if scheme == FORGE_SIGNATURE:
        return (
            f"this endpoint needs a GitHub {GITHUB_SIGNATURE_HEADER} signature or a GitLab {GITLAB_TOKEN_HEADER} "
            "made with the forge webhook secret (an endpoint without a configured secret refuses every delivery)"
        )
    if scheme == TRACKER_SIGNATURE:
        return (
            f"this endpoint needs a {LINEAR_SIGNATURE_HEADER} signature made with the tracker webhook secret "
            "(an endpoint without a configured secret refuses every delivery)"
        )
    if scheme == CI:
        return f"this endpoint needs the {CI_HEADER} header with the CI webhook secret"
    if scheme == CI_OR_BASIC:
        return f"this endpoint needs HTTP basic credentials or the {CI_HEADER} header"
    return "this endpoint needs HTTP basic credentials"
