"""Configured secrets (tokens, passwords, webhook secrets) kept out of what the service stores, shows and logs.

A forge or another outside system may echo a credential back (an error that quotes the request, an address holding a
token): what the service keeps of such an answer (a job's `forge.error`, an outbox message's note, a log line) has
`[redacted]` in the secret's place. The logs apply the same list to every line (`svc/logs.py`).
"""

from __future__ import annotations

import json
from urllib.parse import quote, urlsplit

from domain.config import Config

REDACTED = "[redacted]"
# A secret shorter than this is not looked for: it would blot out ordinary words (none the service generates or
# accepts for a password is this short).
SHORTEST = 6


def secrets_of(config: Config) -> tuple[str, ...]:
    """Every configured secret: the shared and webhook secrets, the bootstrap credentials and password, the forges'
    and the tracker's tokens, the chat webhook's address and the token in its path."""
    values = [
        config.ci_webhook_secret,
        config.basic_auth,
        config.basic_auth.split(":", 1)[1] if config.basic_auth and ":" in config.basic_auth else None,
        config.github_webhook_secret,
        config.gitlab_webhook_token,
        config.forge_webhook_secret,
        config.tracker_webhook_secret,
        config.tracker_api_key,
        config.github_api_token,
        config.gitlab_api_token,
        config.discord_webhook_url,
        *_url_tokens(config.discord_webhook_url),
    ]
    return tuple(dict.fromkeys(v for v in values if v))


def _url_tokens(url: str | None) -> list[str]:
    """The path segments of a webhook address long enough to be its token (a client's log may print the path alone)."""
    if not url:
        return []
    return [s for s in urlsplit(url).path.split("/") if len(s) >= 16 and not s.isdigit()]  # ids are digits


class Redactor:
    """`redactor(text)`: `text` with every configured secret, as written, URL-encoded or JSON-escaped, replaced by
    `[redacted]`; the longest first, so that a secret holding another is replaced whole."""

    def __init__(self, secrets: tuple[str, ...]):
        forms = set()
        for secret in secrets:
            if len(secret) >= SHORTEST:
                forms.update({secret, quote(secret, safe=""), json.dumps(secret)[1:-1]})
        self.forms = tuple(sorted(forms, key=len, reverse=True))

    @classmethod
    def of(cls, config: Config) -> Redactor:
        return cls(secrets_of(config))

    def __call__(self, text: str) -> str:
        for form in self.forms:
            if form in text:
                text = text.replace(form, REDACTED)
        return text
