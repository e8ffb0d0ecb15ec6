"""Fixtures of the web board's browser tests (tests/browser_kit.py)."""

import pytest

from browser_kit import board_server, chromium_browser


@pytest.fixture(scope="module")
def chromium():
    yield from chromium_browser()


@pytest.fixture
def server(tmp_path, database_url):
    yield from board_server(tmp_path, database_url)
