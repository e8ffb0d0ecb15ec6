"""What an identifier may not hold, wherever one is taken (a ticket key, an initiative id, a bay, an account or a rule
name, in a path, a query, a body or a command's arguments): a control character. A trailing line break reads as
nothing on a page, in a log line or a terminal, so `"NL-1\\n"` would pass for `NL-1` to a person while being
another key to the database.

The request bodies hold to it through their schemas' patterns (`contracts/`, read as JSON Schema means them); the
path and query parameters through `api/middleware.py`; the `svc` command's arguments through `refuse_control`.
"""

from __future__ import annotations

import re

from domain.errors import DomainError

# C0 (U+0000-U+001F, tab and line breaks included), DEL and C1 (U+0080-U+009F): Unicode's category Cc.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class ControlCharacter(DomainError):
    """An identifier holds a control character (the message names which, and where)."""

    def __init__(self, what: str, value: str):
        self.what = what
        self.value = value
        super().__init__(f"{what} {value!r} holds the control character {first_control(value)}; an identifier cannot")


def first_control(text: str) -> str | None:
    """`U+000A` for the first control character in `text`, or None when it holds none."""
    found = CONTROL.search(text)
    return f"U+{ord(found.group()):04X}" if found else None


def refuse_control(what: str, value: str) -> str:
    """`value`, or `ControlCharacter` when it holds a control character."""
    if CONTROL.search(value):
        raise ControlCharacter(what, value)
    return value
