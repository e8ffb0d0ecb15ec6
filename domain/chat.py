"""Queueing a chat post: every agent that talks to the chat channel goes through here.

The post is an outbox message of kind `chat`, written in the caller's transaction; the jobs process
delivers it (see `jobs/assembly.py`). Discord caps a message at 2000 characters, so content is cut here,
where it is still known what is being cut.
"""

from __future__ import annotations

from datetime import datetime

from storage import outbox
from storage.models import OutboxMessage

KIND = "chat"
MAX_CONTENT = 2000


def fit(content: str) -> str:
    """`content` cut to the chat limit, marked when cut."""
    content = content.strip() or "(empty message)"
    if len(content) <= MAX_CONTENT:
        return content
    return content[: MAX_CONTENT - 2].rstrip() + " …"


def queue(content: str, *, source: str, at: datetime) -> OutboxMessage:
    """Queue one chat post. `source` says what produced it (`BACKFILL_READY`, `pulse`, `digest`, ...)."""
    return outbox.enqueue(KIND, {"content": fit(content), "source": source}, at=at)
