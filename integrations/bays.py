"""Bay wipes (`api/web/bays.py` shows the bays): `SVC_BAY_WIPE_COMMAND` run with the slot's name, as an argument
list (never through a shell).

The command gets `{slot}` replaced by the slot's name in each argument, no standard input, and a time limit;
on time-out its whole process group is killed, so a wipe script that started children cannot leave them
behind holding the bay. Its exit code and the tail of its output are returned for the timeline. With no
command configured the wipe is recorded only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

OUTPUT_LIMIT = 2000


@dataclass(frozen=True)
class WipeResult:
    slot: str
    ok: bool
    ran: bool  # False when no command is configured: the wipe is recorded only
    detail: str
    argv: tuple[str, ...] = ()
    exit_code: int | None = None
    output: str = ""
    timed_out: bool = False
    duration_ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """What goes onto the timeline and into the agent run."""
        return {
            "ok": self.ok,
            "ran": self.ran,
            "detail": self.detail,
            "argv": list(self.argv),
            "exit_code": self.exit_code,
            "output": self.output,
            "timed_out": self.timed_out,
            "duration_ms": self.duration_ms,
        }


def command_for(template: tuple[str, ...], slot: str) -> tuple[str, ...]:
    """The argument list for `slot`: `{slot}` replaced in every argument, nothing else interpreted."""
    return tuple(arg.replace("{slot}", slot) for arg in template)


def wipe(slot: str, *, command: tuple[str, ...] | None, timeout: float) -> WipeResult:
    """Wipe the bay of `slot`. Never raises for a failing command: the result says what happened."""
    if not command:
        return WipeResult(slot, ok=True, ran=False, detail="no SVC_BAY_WIPE_COMMAND configured: wipe recorded only")
    argv = command_for(command, slot)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a time-out can end everything it started
        )
    except OSError as exc:
        return WipeResult(slot, ok=False, ran=False, detail=f"could not start {argv[0]!r}: {exc}", argv=argv)
    timed_out = False
    try:
        raw, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        try:
            raw, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a grandchild outside the group still holds the pipe
            raw = b""
            proc.stdout.close()
            proc.kill()
            proc.wait()
    elapsed = round((time.monotonic() - started) * 1000, 1)
    output = _tail(raw or b"")
    code = proc.returncode
    if timed_out:
        detail = f"timed out after {timeout:g} s and was killed"
        return WipeResult(slot, False, True, detail, argv, code, output, True, elapsed)
    if code != 0:
        return WipeResult(slot, False, True, f"exited with {code}", argv, code, output, False, elapsed)
    return WipeResult(slot, True, True, "wiped (exit 0)", argv, code, output, False, elapsed)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _tail(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace").strip()
    if len(text) <= OUTPUT_LIMIT:
        return text
    return "…" + text[-(OUTPUT_LIMIT - 1) :]
