"""Fixtures of the web board's browser tests (tests/browser_kit.py; the browser itself: tests/conftest.py)."""

import pytest

from browser_kit import board_server


@pytest.fixture
def server(tmp_path, database_url):
    yield from board_server(tmp_path, database_url)
