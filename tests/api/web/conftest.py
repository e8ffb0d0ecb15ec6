"""Fixtures of the web board's browser tests (tests/browser_kit.py)."""

import pytest

from browser_kit import board_server, chromium_browser


@pytest.fixture(scope="session")
def chromium():
    # One browser per test process (each xdist worker has its own); every test opens its own context in it.
    yield from chromium_browser()


@pytest.fixture
def server(tmp_path, database_url):
    yield from board_server(tmp_path, database_url)
