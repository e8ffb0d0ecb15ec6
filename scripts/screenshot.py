"""Screenshots of the web board for the README, from a fresh demo database: `make screenshot`.

Starts `svc demo` and then `svc run` (the API, the board and the jobs process, as `make run` does) on their own
temporary data directory and a free port (nothing of
`./var` or `$DATABASE_URL` is touched), opens the pages in headless Chromium (Debian's, driven by Playwright)
and writes PNG files:

- `board.png`: the board at a laptop's width, 1280 px (Needs-you and the agents side by side, the stage strip,
  the columns from the first screen on);
- `board-phone.png`: the top of the board at phone width;
- `decisions.png`: the router decisions page, from its filters down: a line a decision;
- `initiatives.png`: the initiatives, their tickets' counts and the controls that agree them;
- `ticket.png`: the ticket page of PORT-9: its timeline, the ticket's entries (a failed bay wipe, the release, a
  tracker close that failed) and the router's decisions about it in one list.

Usage: `python scripts/screenshot.py [--out docs] [--chromium /usr/bin/chromium]` (run with the virtualenv's
Python, where `svc` and Playwright are installed).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

USER = "demo"
# A throwaway server: fresh credentials each run, never written anywhere but its temporary directory.
PASSWORD = secrets.token_urlsafe(18)
CI_SECRET = secrets.token_urlsafe(24)
# The flags the browser test uses: headless as root on a machine with no outside network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--font-render-hinting=none",
]
# A laptop's width: every stage of the board must be in view there without scrolling sideways.
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def service_env(data_dir: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SVC_", "DISCORD_", "OPS_"))}
    env.pop("DATABASE_URL", None)
    env.update(
        SVC_DATA_DIR=str(data_dir),
        DATABASE_URL=f"sqlite:///{data_dir / 'svc.sqlite3'}",
        SVC_PORT=str(port),
        SVC_BASIC_AUTH=f"{USER}:{PASSWORD}",
        SVC_CI_WEBHOOK_SECRET=CI_SECRET,
        SVC_LOG_LEVEL="WARNING",
    )
    return env


def wait_healthy(base: str, server: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"screenshot: svc run exited with {server.returncode}")
        try:
            answer = requests.get(base + "/healthz", timeout=1)
            # Healthy, and the jobs process has beaten: the board shows what a running service shows.
            if answer.status_code == 200 and answer.json()["checks"].get("jobs", {}).get("ok"):
                return
        except (requests.RequestException, ValueError):
            pass
        time.sleep(0.1)
    raise SystemExit(f"screenshot: {base} did not become healthy within {timeout:g} s")


def shoot(base: str, out: Path, chromium: str) -> list[Path]:
    from playwright.sync_api import sync_playwright

    written = []
    credentials = {"username": USER, "password": PASSWORD}
    # Chromium does not start under libfaketime (scripts/shifted_clock.sh): it keeps the real clock.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("FAKETIME")}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, env=env)
        try:
            desktop = browser.new_context(http_credentials=credentials, viewport=DESKTOP, device_scale_factor=1)
            page = desktop.new_page()
            # (file, page, the whole page or the window, what to scroll to the top of the window first)
            for name, path, full, top in (
                ("board.png", "/", True, None),
                ("decisions.png", "/decisions", False, "form.filters[role=search]"),
                ("initiatives.png", "/initiatives", False, None),
                ("ticket.png", "/tickets/PORT-9", False, None),
            ):
                page.goto(base + path, wait_until="networkidle")
                if top:
                    page.locator(top).evaluate("element => element.scrollIntoView()")
                target = out / name
                page.screenshot(path=str(target), full_page=full)
                written.append(target)
            desktop.close()
            phone = browser.new_context(
                http_credentials=credentials, viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True
            )
            page = phone.new_page()
            page.goto(base + "/", wait_until="networkidle")
            target = out / "board-phone.png"
            page.screenshot(path=str(target))
            written.append(target)
            phone.close()
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder for the PNG files (docs)")
    parser.add_argument("--chromium", default=os.environ.get("SVC_TEST_CHROMIUM", "/usr/bin/chromium"))
    args = parser.parse_args(argv)
    if not shutil.which(args.chromium) and not Path(args.chromium).exists():
        print(f"screenshot: no Chromium at {args.chromium}: install Debian's chromium package", file=sys.stderr)
        return 2
    svc = str(Path(sys.executable).with_name("svc"))
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="svc-screenshot-") as tmp:
        data_dir = Path(tmp)
        port = free_port()
        env = service_env(data_dir, port)
        subprocess.run([svc, "demo"], env=env, check=True)
        with open(data_dir / "serve.log", "wb") as log:
            server = subprocess.Popen([svc, "run"], env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                base = f"http://127.0.0.1:{port}"
                wait_healthy(base, server)
                written = shoot(base, args.out, args.chromium)
            finally:
                server.terminate()
                try:
                    server.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
    for path in written:
        print(f"screenshot: wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
