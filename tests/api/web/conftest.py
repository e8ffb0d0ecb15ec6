"""Fixtures of the web board's browser tests (tests/browser_kit.py)."""

import pytest

from browser_kit import board_server, chromium_browser


@pytest.fixture(scope="session")
def browser():
    # One browser per test process (each xdist worker has its own); every test opens its own contexts in it.
    yield from chromium_browser()


@pytest.fixture
def chromium(browser):
    """The browser, for one test: whatever contexts the test leaves open (a failure before its `context.close()`)
    are closed after it, so no page of one test goes on asking a server while the next one runs."""
    yield browser
    for context in browser.contexts:
        context.close()


@pytest.fixture
def server(tmp_path, database_url):
    yield from board_server(tmp_path, database_url)
