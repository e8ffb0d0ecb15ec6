"""Settings: small named JSON values with who changed them and when."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from storage import statements
from storage.models import Setting


def get(key: str) -> Setting | None:
    return statements.select_one(Setting, {"key": key})


def put(key: str, value: Any, *, at: datetime, by: str | None) -> None:
    (
        Setting.insert(key=key, value=value, updated_at=at, updated_by=by)
        .on_conflict(
            conflict_target=[Setting.key],
            update={Setting.value: value, Setting.updated_at: at, Setting.updated_by: by},
        )
        .execute()
    )
