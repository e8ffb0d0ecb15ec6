"""One writing step of the content repository, then the notify hook.

    python3 scripts/writing_step.py status | catchup | finalize-batch

Runs `$WRITING_ENGINE <step>` — the repository's own writing tool (default `node scripts/writing-engine.mjs`),
which prints, as the last line of its standard output, one JSON object:

    {"status": "BACKFILL_READY", "missing": 2, "items": [{"date": "2026-11-19", "slug": "...", "title": "..."}]}

and reports that status to the service with `notify_hook.py` (copied from the service: `clients/notify_hook.py`).
A tool that fails without saying which failure reports FAIL_STATUS, FAIL_DRAFT or FAIL_PUSH for its step.
Exit code: 0 when the step and the report went through; otherwise the tool's failure (1) or the hook's code.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import notify_hook  # copied next to this script from the service (clients/notify_hook.py)

FAILURE_OF_STEP = {"status": "FAIL_STATUS", "catchup": "FAIL_DRAFT", "finalize-batch": "FAIL_PUSH"}
STEP_TIMEOUT = float(os.environ.get("WRITING_STEP_TIMEOUT", "7200"))


def engine_result(step: str) -> tuple[dict, bool]:
    """Run the writing tool for `step`: (its JSON result, whether it succeeded)."""
    engine = shlex.split(os.environ.get("WRITING_ENGINE", "node scripts/writing-engine.mjs"))
    try:
        done = subprocess.run([*engine, step], capture_output=True, text=True, timeout=STEP_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"writing {step}: the writing tool did not run: {exc}", file=sys.stderr)
        return {"status": FAILURE_OF_STEP[step]}, False
    sys.stderr.write(done.stderr)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1]) if lines else {}
    except ValueError:
        result = {}
    if not isinstance(result, dict):
        result = {}
    if done.returncode != 0 or "status" not in result:
        status = result.get("status", "")
        if not str(status).startswith("FAIL_"):
            result["status"] = FAILURE_OF_STEP[step]
        return result, False
    return result, True


def run_step(step: str) -> int:
    if step not in FAILURE_OF_STEP:
        print(f"unknown step {step!r}: expected one of {', '.join(FAILURE_OF_STEP)}", file=sys.stderr)
        return 2
    result, ok = engine_result(step)
    status = result["status"]
    try:
        # One Idempotency-Key per report, reused by the hook's own retries: a retried report counts once.
        answer = notify_hook.notify(status, missing=result.get("missing"), items=result.get("items"))
    except notify_hook.HookError as exc:
        print(f"notify: {exc}", file=sys.stderr)
        return exc.code
    if answer is not None:
        print(notify_hook.describe(status, answer))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_step(sys.argv[1] if len(sys.argv) > 1 else ""))
