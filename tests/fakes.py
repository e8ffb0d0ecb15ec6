"""Test doubles that are not mocks: a clock that moves only when told."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    def __init__(self, start: datetime | None = None):
        self.now = start or datetime(2026, 11, 20, 10, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta) -> datetime:
        self.now = self.now + timedelta(**delta)
        return self.now

    def move_to(self, when: datetime) -> None:
        self.now = when
