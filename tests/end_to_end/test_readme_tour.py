"""The README's five-minute tour, run as written: its shell blocks, in order, in one shell, against a real `svc run`
(what `make run` starts), from a scratch folder laid out like the checkout (`examples/`, `.venv/bin/svc`, the data
in `./var`). Two stand-ins, and only these: the address the tour names (`B=http://127.0.0.1:8080`) is this test's
free port, and `make run`, where the tour restarts the service with another environment, restarts `svc run` with
it (the real target would install first). A person's password is piped, as `svc user add` allows.

The tour ends at what a reader is promised: a decision `blocked` with each gate saying why, then, once the
initiative is agreed and the CI actor allowed (a new version of the router's policy, set while the service runs),
the fixer `would_dispatch`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import requests

from processes import SVC, free_port, svc_env

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
ADDRESS = "B=http://127.0.0.1:8080"

# `make run` as the tour's reader runs it, in this shell: stop the service it started before, start `svc run` again
# with the environment given on the line, and wait until it answers.
STAND_IN = """
set -euo pipefail
make() {
  [ "$1" = run ] || { echo "the tour ran 'make $*', which this test has no stand-in for" >&2; return 2; }
  if [ -n "${SERVICE:-}" ]; then kill -TERM "$SERVICE"; wait "$SERVICE" || true; fi
  .venv/bin/svc run </dev/null >>service.log 2>&1 &
  SERVICE=$!
  for _ in $(seq 600); do
    curl -s -o /dev/null "http://127.0.0.1:$SVC_PORT/healthz" && return 0
    kill -0 "$SERVICE" 2>/dev/null || { echo "svc run exited" >&2; return 1; }
    sleep 0.1
  done
  echo "svc run did not answer" >&2; return 1
}
trap 'if [ -n "${SERVICE:-}" ]; then kill -TERM "$SERVICE"; wait "$SERVICE" || true; fi' EXIT
make run
"""


def tour_blocks() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    tour = readme.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", tour, flags=re.S)


def test_the_readme_tour_runs_as_written_and_reaches_would_dispatch(tmp_path, database_url):
    checkout = tmp_path / "checkout"
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "svc").symlink_to(SVC)
    (checkout / "examples").symlink_to(ROOT / "examples")
    port = free_port()
    script = "\n".join(tour_blocks())
    assert script.count(ADDRESS) == 1, "the tour names its address once, in B=..."
    (checkout / "tour.sh").write_text(STAND_IN + script.replace(ADDRESS, f"B=http://127.0.0.1:{port}"))
    env = svc_env(SVC_PORT=str(port), DATABASE_URL=database_url)
    env.pop("SVC_DATA_DIR", None)  # the tour's data is ./var, as `make run` leaves it
    tour = subprocess.Popen(
        ["bash", "tour.sh"],
        cwd=checkout,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # so a tour that hangs is stopped whole, its service included
    )
    try:
        output, _ = tour.communicate("alice-password-1\n", timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(tour.pid, signal.SIGTERM)
        output, _ = tour.communicate(timeout=60)
        pytest.fail("the tour did not finish:\n" + output[-3000:])
    service_log = (checkout / "service.log").read_text() if (checkout / "service.log").exists() else ""
    assert tour.returncode == 0, output[-3000:] + service_log[-2000:]

    # What the reader was promised, read back from the database the tour left (the service has stopped).
    assert '"outcome":"would_dispatch"' in output.replace(" ", "")
    credentials = dict(
        line.split("=", 1) for line in (checkout / "var" / "credentials.env").read_text().splitlines() if "=" in line
    )
    user, password = credentials["SVC_BASIC_AUTH"].split(":", 1)
    again = subprocess.Popen(
        [SVC, "serve"], cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        decisions = _decisions(port, (user, password))
        ticket = requests.get(f"http://127.0.0.1:{port}/api/v1/tickets/PORT-12", auth=(user, password), timeout=10)
    finally:
        again.terminate()
        again.wait(timeout=30)
    by_event = {decision["event_id"]: decision for decision in decisions}
    first, newest = by_event["github:tour-1"], by_event["github:tour-2"]
    assert (first["outcome"], first["role"]) == ("blocked", "fixer")
    reasons = {gate["gate"]: gate["reason"] for gate in first["gates"] if not gate["passed"]}
    assert reasons == {
        "authorization": "actor github:github-actions is not on the policy's allowlist",
        "agreement": "initiative portfolio is at agree, not yet agreed",
    }
    assert (newest["outcome"], newest["role"], newest["rule"]) == ("would_dispatch", "fixer", "fixer")
    assert all(gate["passed"] for gate in newest["gates"])
    # Under the policy the tour set while the service ran (`svc policy set`), not the one it started with.
    assert newest["policy"]["allowlist"] == ["github:github-actions"] != first["policy"]["allowlist"]
    assert "svc user: added alice (operator" in output
    # The ticket followed its pull request, in shadow mode too: the red run on its head sent it back to execute.
    assert (ticket.json()["stage"], ticket.json()["waiting_on"]) == ("execute", "agent_failed")


def _decisions(port: int, auth: tuple[str, str]) -> list[dict]:
    from processes import wait_until

    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return requests.get(base + "/healthz", timeout=2).status_code in (200, 503)
        except requests.RequestException:
            return False

    wait_until(answers, timeout=60, what="svc serve on the tour's data")
    found = requests.get(base + "/api/v1/router/decisions?subject_id=PORT-12", auth=auth, timeout=10)
    found.raise_for_status()
    return found.json()["decisions"]
