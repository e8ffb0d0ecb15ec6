"""examples/content-repo: its writing steps and its scheduled poll, run with the hook copied in as a content
repository would have it, against a real `svc serve`."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from clients import notify_hook

from processes import start_service, svc_env

pytestmark = pytest.mark.process

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "content-repo"
SECRET = "example-ci-secret-0123456789"
BASIC = ("admin", "example-password-1")

# The repository's own writing tool, stood in for: it says what each step found, and leaves a trace.
ENGINE = """
import json, sys, pathlib
step = sys.argv[1]
pathlib.Path("engine-ran").write_text(step)
results = {
    "status": {"status": "BACKFILL_READY", "missing": 2, "items": [{"date": "2026-11-19"}, {"date": "2026-11-20"}]},
    "catchup": {"status": "BACKFILL_READY", "missing": 2, "items": [{"date": "2026-11-19", "slug": "a", "title": "A"}]},
    "finalize-batch": {"status": "SUCCESS", "missing": 0, "items": [{"date": "2026-11-20", "slug": "b", "title": "B"}]},
}
print("drafting...")
print(json.dumps(results[step]))
"""


@pytest.fixture
def repo(tmp_path):
    """The example, with `clients/notify_hook.py` copied in (outside the service's package)."""
    root = tmp_path / "content-repo"
    shutil.copytree(EXAMPLE, root)
    shutil.copy(notify_hook.__file__, root / "scripts" / "notify_hook.py")
    (root / "engine.py").write_text(ENGINE)
    return root


@pytest.fixture
def service(tmp_path, database_url):
    server, base = start_service(
        tmp_path,
        database_url,
        SVC_CI_WEBHOOK_SECRET=SECRET,
        SVC_BASIC_AUTH=":".join(BASIC),
        SVC_SITE_URL="https://site.example",
    )
    yield base
    server.stop()


def run(repo, base, script, *args, **env):
    # The scripts run as CI would run them: their own directory, a plain interpreter, no service package path.
    values = svc_env(
        SVC_CI_WEBHOOK_SECRET=SECRET, SVC_BASE_URL=base, WRITING_ENGINE=f"{sys.executable} engine.py", **env
    )
    values.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, f"scripts/{script}", *args],
        cwd=repo,
        env=values,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def last_run(base):
    runs = requests.get(base + "/api/v1/agents/runs?agent_id=writing-daily", auth=BASIC, timeout=5).json()["runs"]
    return runs[0] if runs else None


def test_each_writing_step_reports_its_status(repo, service):
    for step, status in (("status", "BACKFILL_READY"), ("catchup", "BACKFILL_READY"), ("finalize-batch", "SUCCESS")):
        done = run(repo, service, "writing_step.py", step)
        assert done.returncode == 0, done.stderr
        assert f"notify: {status} recorded on WRITING-DAILY" in done.stdout
        assert last_run(service)["status"] == status
    ticket = requests.get(service + "/api/v1/tickets/WRITING-DAILY", auth=BASIC, timeout=5).json()
    assert ticket["stage"] == "done" and ticket["link"] == "https://site.example/writing/b"


def test_a_step_whose_tool_fails_reports_the_failure(repo, service):
    (repo / "engine.py").write_text("import sys\nprint('push rejected', file=sys.stderr)\nsys.exit(4)\n")
    done = run(repo, service, "writing_step.py", "finalize-batch")
    assert done.returncode == 1
    assert last_run(service)["status"] == "FAIL_PUSH"


def test_the_poll_catches_up_while_automation_is_on(repo, service):
    done = run(repo, service, "writing_poll.py")
    assert done.returncode == 0, done.stderr
    assert (repo / "engine-ran").read_text() == "catchup"
    assert last_run(service)["status"] == "BACKFILL_READY"


def test_the_poll_reports_automation_disabled_and_does_nothing_while_it_is_off(repo, service):
    assert requests.post(
        service + "/api/v1/agents/writing/automation", json={"enabled": False}, auth=BASIC, timeout=5
    ).ok

    done = run(repo, service, "writing_poll.py")

    assert done.returncode == 0, done.stderr
    assert "reported AUTOMATION_DISABLED" in done.stdout
    assert not (repo / "engine-ran").exists()  # the writing tool never ran
    assert last_run(service)["status"] == "AUTOMATION_DISABLED"
    # a manual finalize-batch still works while automation is off
    assert run(repo, service, "writing_step.py", "finalize-batch").returncode == 0
    assert last_run(service)["status"] == "SUCCESS"


def test_the_hook_switched_off_locally_stops_the_poll_quietly(repo, service):
    done = run(repo, service, "writing_poll.py", WRITING_AUTOMATION="0")
    assert done.returncode == 0 and last_run(service) is None and not (repo / "engine-ran").exists()


def test_the_package_scripts_and_the_ci_schedule_call_these_steps():
    scripts = json.loads((EXAMPLE / "package.json").read_text())["scripts"]
    assert scripts == {
        "writing:status": "python3 scripts/writing_step.py status",
        "writing:catchup": "python3 scripts/writing_step.py catchup",
        "writing:finalize-batch": "python3 scripts/writing_step.py finalize-batch",
        "writing:poll": "python3 scripts/writing_poll.py",
    }
    workflow = (EXAMPLE / ".github" / "workflows" / "writing-poll.yml").read_text()
    assert '- cron: "0 9,18 * * *"' in workflow and "npm run writing:poll" in workflow
    assert "secrets.SVC_CI_WEBHOOK_SECRET" in workflow
