"""The scheduled writing poll (CI cron `0 9,18 * * *`, see .github/workflows/writing-poll.yml).

Asks the service (`GET /api/v1/agents/writing/config`, with the CI secret) whether writing automation is on.
Off: reports AUTOMATION_DISABLED and does nothing else. On: runs the catch-up step, which reports its status.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import notify_hook  # copied next to this script from the service (clients/notify_hook.py)
import writing_step


def main() -> int:
    off = notify_hook.disabled_by(os.environ)
    if off:
        print(f"writing poll: {off}=0 here; nothing to do")
        return 0
    try:
        config = notify_hook.fetch_config()
        if not config.get("automation_enabled", True):
            answer = notify_hook.notify("AUTOMATION_DISABLED")
            print("writing poll: automation is off on the service; reported AUTOMATION_DISABLED, nothing else done")
            if answer is not None:
                print(notify_hook.describe("AUTOMATION_DISABLED", answer))
            return 0
    except notify_hook.HookError as exc:
        print(f"writing poll: {exc}", file=sys.stderr)
        return exc.code
    return writing_step.run_step("catchup")


if __name__ == "__main__":
    sys.exit(main())
