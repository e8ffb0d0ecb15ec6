"""`scripts/screenshot.py` (what `make screenshot` runs) makes the README's pictures from a fresh demo database."""

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.process]

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "screenshot.py"
CHROMIUM = os.environ.get("SVC_TEST_CHROMIUM", "/usr/bin/chromium")


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_the_script_writes_the_board_the_decisions_and_a_ticket_page(tmp_path):
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        message = f"Chromium not found at {CHROMIUM}: install Debian's chromium package (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--chromium", CHROMIUM],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sizes = {path.name: png_size(path) for path in tmp_path.glob("*.png")}
    assert set(sizes) == {"board.png", "board-phone.png", "decisions.png", "initiatives.png", "ticket.png"}
    assert sizes["board.png"][0] == 1280 and sizes["board.png"][1] > 900  # the whole board, not a blank page
    assert sizes["board-phone.png"] == (390 * 2, 844 * 2)
    assert "svc demo: 18 tickets" in done.stdout
