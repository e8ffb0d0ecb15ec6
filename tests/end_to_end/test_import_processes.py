"""`svc import` as a team runs it: the installed command, in a process of its own, while `svc serve` routes live
events on the same database. What the command counts, refuses and never does is tests/svc/test_import_command.py's,
in-process."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
from datetime import UTC, datetime, timedelta

import pytest
import requests

from domain.clock import iso

from events_kit import ALLOWLIST
from processes import SVC, start_service, svc_env
from router_kit import envelope

pytestmark = [pytest.mark.process, pytest.mark.both_backends]

CI = "import-test-ci-secret-0123456789"
BASIC = ("admin", "import-test-password-1")
SERVER_ENV = {
    "SVC_BASIC_AUTH": ":".join(BASIC),
    "SVC_CI_WEBHOOK_SECRET": CI,
    "SVC_ROUTER_ALLOWLIST": ",".join(sorted(ALLOWLIST)),
}


def test_an_import_runs_while_the_service_routes_live_events(tmp_path, database_url):
    server, base = start_service(tmp_path, database_url, **SERVER_ENV)
    start = datetime.now(UTC) - timedelta(days=60)
    history = tmp_path / "history.jsonl"
    lines = [envelope("state_changed", f"PORT-{n % 40 + 1}", at=start + timedelta(minutes=7 * n)) for n in range(900)]
    history.write_text("".join(json.dumps(line) + "\n" for line in lines))
    answers: list[int] = []
    stop = threading.Event()

    def live() -> None:
        headers = {"X-Svc-CI-Secret": CI}
        while not stop.is_set() or len(answers) < 5:
            document = envelope("state_changed", "PORT-99", at=datetime.now(UTC))
            answers.append(
                requests.post(base + "/api/v1/events", json=document, headers=headers, timeout=30).status_code
            )

    values = {"SVC_DATA_DIR": str(tmp_path / "data"), "DATABASE_URL": database_url, **SERVER_ENV}
    sender = threading.Thread(target=live)
    try:
        sender.start()
        done = subprocess.run(
            [SVC, "import", str(history)], env=svc_env(**values), capture_output=True, text=True, timeout=300
        )
        stop.set()
        sender.join(timeout=60)
        assert (done.returncode, done.stdout, done.stderr) == (0, "imported 900, duplicates 0, rejected 0\n", "")
        assert answers and set(answers) == {202}
        auth = "Basic " + base64.b64encode(":".join(BASIC).encode()).decode()
        recorded, cursor = [], None
        while True:
            query = f"?limit=200&cursor={cursor}" if cursor else "?limit=200"
            page = requests.get(base + "/api/v1/router/decisions" + query, headers={"Authorization": auth}, timeout=30)
            assert page.status_code == 200, page.text
            recorded += page.json()["decisions"]
            cursor = page.json()["next"]
            if not cursor:
                break
        imported = [d for d in recorded if d["subject_id"] != "PORT-99"]
        assert len(imported) == 900 and len(recorded) == 900 + len(answers)
        first = min(imported, key=lambda d: d["id"])
        assert first["evaluated_at"] == iso(start) and first["dispatched"] is False
    finally:
        stop.set()
        sender.join(timeout=60)
        server.stop()
