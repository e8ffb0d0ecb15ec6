"""A stand-in for the bays' wipe tooling: a real command (`python wiper.py {slot}`) that the service runs as
`SVC_BAY_WIPE_COMMAND`. It appends each slot it wiped to a log, fails for slots marked to fail, and can be
held mid-wipe until released (for the SIGTERM test)."""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPT = """
import pathlib, sys, time
folder = pathlib.Path(sys.argv[1]); slot = sys.argv[2]
if (folder / f"fail-{slot}").exists():
    print(f"cannot wipe {slot}: bay unreachable")
    sys.exit(7)
if (folder / "hold").exists():
    (folder / f"started-{slot}").write_text("")
    deadline = time.monotonic() + 60
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
with open(folder / "wiped.log", "a") as log:
    log.write(slot + "\\n")
print(f"wiped {slot}")
"""


class BayWiper:
    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.script = folder / "wiper.py"
        self.script.write_text(SCRIPT)

    @property
    def command(self) -> tuple[str, ...]:
        return (sys.executable, str(self.script), str(self.folder), "{slot}")

    @property
    def command_line(self) -> str:
        """The command as the environment variable holds it."""
        import shlex

        return shlex.join(self.command)

    @property
    def wiped(self) -> list[str]:
        log = self.folder / "wiped.log"
        return log.read_text().split() if log.exists() else []

    def fail(self, slot: str) -> None:
        (self.folder / f"fail-{slot}").write_text("")

    def heal(self, slot: str) -> None:
        (self.folder / f"fail-{slot}").unlink()

    def hold(self) -> None:
        (self.folder / "hold").write_text("")

    def started(self, slot: str) -> bool:
        return (self.folder / f"started-{slot}").exists()

    def release(self) -> None:
        (self.folder / "release").write_text("")
