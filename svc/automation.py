"""Reading the writing automation toggle (on by default)."""

from __future__ import annotations

from machines.automation import DEFAULT_ENABLED
from storage import settings

SETTING_KEY = "writing.automation"


def is_enabled() -> bool:
    row = settings.get(SETTING_KEY)
    if row is None:
        return DEFAULT_ENABLED
    return bool(row.value.get("enabled", DEFAULT_ENABLED))
