"""Debian's nginx, started by a test as a process of its own (no root, no system paths), in front of a real
`svc serve`, with the example configuration of docs/operating.md: what the manual tells people to run is what the
test runs. Without nginx the test skips, saying why, except under CI, where it fails (as the browser tests treat
Chromium)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import requests

from processes import free_port, wait_until

NGINX = os.environ.get("SVC_TEST_NGINX", "/usr/sbin/nginx")
OPERATING = Path(__file__).resolve().parents[1] / "docs" / "operating.md"


def nginx_binary() -> str:
    found = NGINX if os.path.exists(NGINX) else shutil.which(NGINX)
    if not found:
        message = f"nginx not found at {NGINX}: install Debian's nginx package (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def documented_config() -> str:
    """The nginx block of docs/operating.md, as written there."""
    (block,) = re.findall(r"```nginx\n(.*?)```", OPERATING.read_text(), flags=re.S)
    return block


class Nginx:
    """nginx in the foreground (one process, `master_process off`), its pid, logs and temporary files in `where`,
    proxying plain HTTP on a free port of 127.0.0.1 to `upstream_port`."""

    def __init__(self, where: Path, upstream_port: int):
        self.where = where
        self.port = free_port()
        site = documented_config()
        site = site.replace("server 127.0.0.1:8080;", f"server 127.0.0.1:{upstream_port};")
        site = site.replace("listen 443 ssl;", f"listen 127.0.0.1:{self.port};")  # the test speaks plain HTTP
        assert f"127.0.0.1:{upstream_port}" in site and f"127.0.0.1:{self.port}" in site, "the documented block changed"
        temp = "\n".join(
            f"    {kind}_temp_path {where / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        where.mkdir(parents=True, exist_ok=True)
        (where / "nginx.conf").write_text(
            f"daemon off;\nmaster_process off;\npid {where / 'nginx.pid'};\nerror_log {where / 'error.log'} info;\n"
            "events { worker_connections 1024; }\n"
            f"http {{\n    access_log {where / 'access.log'};\n{temp}\n{site}\n}}\n"
        )
        self.proc = subprocess.Popen(
            [nginx_binary(), "-p", str(where), "-c", str(where / "nginx.conf"), "-e", str(where / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        wait_until(self._answers, timeout=20, what="nginx listening")

    def _answers(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"nginx exited with {self.proc.returncode}: {self.errors()}")
        try:
            requests.get(self.base + "/healthz", timeout=2)
            return True
        except requests.RequestException:
            return False

    def errors(self) -> str:
        path = self.where / "error.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
