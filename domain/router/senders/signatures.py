"""How the senders prove a delivery is theirs: GitHub and Linear sign the raw body with HMAC-SHA256 under a shared
secret; GitLab sends its token itself. Every comparison is constant-time."""

from __future__ import annotations

import hashlib
import hmac


def same_secret(given: str | bytes, expected: str | bytes) -> bool:
    """Constant-time comparison of two secrets (or a given signature with the expected one)."""
    given_b = given.encode() if isinstance(given, str) else given
    expected_b = expected.encode() if isinstance(expected, str) else expected
    return hmac.compare_digest(given_b, expected_b)


def hmac_sha256_hex(secret: str, body: bytes) -> str:
    """The hex HMAC-SHA256 of `body` under `secret`, as GitHub and Linear sign webhook deliveries."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
