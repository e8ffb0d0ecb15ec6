"""One machine instance per thread and machine class, reused across rows.

Building a python-statemachine instance registers every callback anew and costs about half a millisecond,
more than the rest of a notify's work. A machine reads its model's state on every `send`, so one instance
bound to a small holder serves every row: the caller copies the row's fields into the holder, sends the
event, and copies the result back. A machine that reached a final state has stopped for good; it is
replaced before its next use.
"""

from __future__ import annotations

import threading
from typing import Any

_local = threading.local()


class Holder:
    """The model a reused machine is bound to: the fields the machines read or write."""

    def __init__(self) -> None:
        self.key: str = ""
        self.stage: str = ""
        self.state: str = ""
        self.waiting_on: str | None = None


def machine(cls: type) -> tuple[Any, Holder]:
    """This thread's instance of machine class `cls` (built on first use, rebuilt once terminated)."""
    cache: dict[type, tuple[Any, Holder]] = _local.__dict__.setdefault("machines", {})
    found = cache.get(cls)
    if found is None or found[0].is_terminated:
        holder = Holder()
        found = (cls(holder), holder)
        cache[cls] = found
    return found
