"""A consistent copy of the SQLite database, taken while the service serves writes (`svc backup PATH`).

SQLite's online backup API copies the pages of one read transaction: in WAL mode that is a snapshot of every
transaction committed before it began, and writers carry on beside it (the copy is made in a single step, so a
write during it never restarts it). The copy is written next to its destination, checked with
`PRAGMA integrity_check`, made durable and only then renamed into place: a copy that is there is a whole one.
PostgreSQL has its own tools (`pg_dump`); this module is for the embedded default.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path


class BackupError(RuntimeError):
    """The copy could not be made; nothing was left at the destination."""


@dataclass(frozen=True)
class BackupResult:
    target: Path
    pages: int
    bytes: int


def copy_sqlite(source: Path, target: Path, *, busy_timeout_ms: int = 10_000) -> BackupResult:
    """Copy the SQLite database at `source` to `target` (which must not exist) and return what was written."""
    if not source.exists():
        raise BackupError(f"there is no database at {source}")
    if target.exists():
        raise BackupError(f"{target} exists already; give a new path (the backup never overwrites a file)")
    if not target.parent.exists():
        raise BackupError(f"there is no folder {target.parent}: create it first (mkdir -p {target.parent})")
    if not target.parent.is_dir():
        raise BackupError(f"{target.parent} is not a directory")
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        # The copy holds people's password hashes: readable by its owner alone from its first byte (0600, like
        # the credentials file), whatever the umask.
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.chmod(partial, 0o600)
        live = sqlite3.connect(source, timeout=busy_timeout_ms / 1000)
        try:
            copy = sqlite3.connect(partial)
            try:
                live.backup(copy)  # pages=-1: all of them in one step, from one snapshot
                # One self-contained file: no -wal beside it to lose when it is copied or restored.
                copy.execute("PRAGMA journal_mode = DELETE").fetchone()
                verdict = copy.execute("PRAGMA integrity_check").fetchall()
                if verdict != [("ok",)]:
                    raise BackupError(f"the copy failed its integrity check: {verdict[:5]}")
                pages = copy.execute("PRAGMA page_count").fetchone()[0]
            finally:
                copy.close()
        finally:
            live.close()
        _fsync(partial)
        os.link(partial, target)  # fails, rather than overwrites, if the target appeared meanwhile
        _fsync(target.parent)
    except sqlite3.Error as exc:
        raise BackupError(f"the copy failed: {exc}") from None
    except FileExistsError:
        raise BackupError(f"{target} exists already; give a new path (the backup never overwrites a file)") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return BackupResult(target=target, pages=pages, bytes=target.stat().st_size)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
