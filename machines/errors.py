"""The one exception every machine raises for a move it forbids (`domain/errors.py` raises it on)."""

from __future__ import annotations


class TransitionForbidden(Exception):
    """A move the machine does not allow from the current stage (answered 409 by the API)."""

    def __init__(self, message: str, *, current: str, event: str):
        self.current = current
        self.event = event
        super().__init__(message)
