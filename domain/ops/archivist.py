"""The archivist (daily at 03:30 UTC in `svc jobs`, once with `svc archive`): detail older than `SVC_KEEP_DAYS` leaves
the database for gzip-compressed JSON-lines files under `SVC_DATA_DIR/archive/`, one per kind and month of the rows'
own time (`decisions-2026-03.jsonl.gz`), each line the API's shape of the row (`domain/shapes.py`).

What leaves (the rows: `storage/archive.py`): decisions, the timeline entries of finished tickets, agent runs, outbox
messages delivered or given up, finished dispatch jobs, settled reconciliation gaps. Never a live ticket's entries,
an open job (nor the decision it came from), an account or the policy's history.

A crash loses nothing and doubles nothing. Each month's file is written whole under a temporary name, synced and
renamed over the old one (its bytes, then a gzip member of the new lines: `zcat` and Python's gzip read members in
a row as one stream) before any row is deleted; a row whose line the file holds already (by its id) is not written
again. A crash between the two leaves the rows in the database and their lines in the file: the next run writes
none of them again and deletes them.

The scorecard keeps its counts: its entries stay when their decisions go (they hold the decision's id, not a
reference to its row), and before decisions go every settled day is
counted (`scorecard.keep_through`, injected: the router hears the ops agents, not the other way round), and a judged
decision (one with a scorecard entry) goes only from a counted day. Each delete is counted per hour in its own
transaction (`ArchivedCount`): a backtest over an archived range says how many decisions it could not read.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from domain import shapes, units
from domain.clock import Clock, iso
from domain.config import Config
from domain.gaps import SETTLED, Gap
from domain.ops import runs
from domain.ops.runs import Trigger
from machines.job import FINAL as FINAL_JOB_STATES
from machines.stages import FINAL_STAGES
from storage import archive
from storage.db import connection
from storage.decisions import NOT_BACKTESTED
from storage.models import AgentRun

ARCHIVIST_AGENT = "archivist"
ARCHIVE_DIR = "archive"

# Each kind's line: the API's shape of its row.
SHAPES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "decisions": shapes.decision,
    "timeline": shapes.timeline_entry,
    "runs": shapes.run,
    "outbox": shapes.outbox_message,
    "jobs": shapes.job,
    "gaps": lambda row: shapes.gap(Gap.of(row)),
}
# In words, for the run's summary.
NOUNS = {
    "decisions": "decisions",
    "timeline": "timeline entries",
    "runs": "agent runs",
    "outbox": "outbox messages",
    "jobs": "jobs",
    "gaps": "reconciliation gaps",
}


def identity(kind: str, line: dict[str, Any]) -> Any:
    """What names a row in its kind's file: its id; a gap's shape has none, so its sender, hook, guid and when it was
    found (the ledger keeps one row per sender, hook and guid)."""
    if kind == "gaps":
        return (line["sender"], line["hook"], line["guid"], line["found_at"])
    return line["id"]


@dataclass(frozen=True)
class ArchiveReport:
    before: datetime
    moved: dict[str, int]
    files: list[str]
    run: AgentRun

    @property
    def total(self) -> int:
        return sum(self.moved.values())


class Archivist:
    """Moves what is older than the cutoff out; `keep_scorecard(now)` counts the scorecard's settled days and says
    until when its counts are kept, `scorecard_kept_until()` says it again inside each delete (both
    `domain/router/scorecard.py`'s). `written(kind)`, when given, is called once a kind's files are written and before
    its rows are deleted (where a test makes a crash)."""

    agent_id = ARCHIVIST_AGENT

    def __init__(
        self,
        config: Config,
        clock: Clock,
        *,
        keep_scorecard: Callable[[datetime], datetime | None],
        scorecard_kept_until: Callable[[], datetime | None],
        written: Callable[[str], None] | None = None,
    ):
        self.config = config
        self.clock = clock
        self.directory = config.data_dir / ARCHIVE_DIR
        self.keep_scorecard = keep_scorecard
        self.scorecard_kept_until = scorecard_kept_until
        self.written = written
        self.kinds = archive.kinds(final_stages=FINAL_STAGES, final_jobs=FINAL_JOB_STATES, settled_gaps=SETTLED)

    def __call__(self, trigger: Trigger) -> ArchiveReport:
        return self.run(trigger)

    def cutoff(self, now: datetime) -> datetime:
        """What is older than this moves: `SVC_KEEP_DAYS` before now."""
        return now - timedelta(days=self.config.keep_days)

    def run(self, trigger: Trigger, *, before: datetime | None = None) -> ArchiveReport:
        """Move every row older than `before` (default: the cutoff), kind by kind; record the run with how many of
        each kind moved."""
        with connection():
            started = self.clock()
            cutoff = before if before is not None else self.cutoff(started)
            kept = self.keep_scorecard(started)
            moved: dict[str, int] = {}
            files: set[str] = set()
            for kind in self.kinds:
                moved[kind.name], names = self._move(kind, cutoff, kept)
                files.update(names)
            summary = ", ".join(f"{moved[k.name]} {NOUNS[k.name]}" for k in self.kinds)
            run = units.run(
                lambda: runs.record(
                    self.agent_id,
                    trigger=trigger,
                    started_at=started,
                    finished_at=self.clock(),
                    status="ARCHIVED",
                    ok=True,
                    summary=f"moved {summary} older than {iso(cutoff)} to {ARCHIVE_DIR}/",
                    details={"before": iso(cutoff), "moved": moved, "files": sorted(files)},
                ),
                what="recording the archivist's run",
            )
        return ArchiveReport(cutoff, moved, sorted(files), run)

    def _move(self, kind: archive.Kind, before: datetime, scored_before: datetime | None) -> tuple[int, list[str]]:
        """Write the kind's old rows to their month files, then delete them; how many were deleted, and the files
        written. A judged decision goes only from a day the scorecard has counted (before `scored_before`): its
        entry goes with it, and the day's counts stay."""
        months: dict[str, MonthFile] = {}
        shape = SHAPES[kind.name]
        with _locked(self.directory):
            try:
                for row in archive.old_rows(kind, before, scored_before):
                    month = getattr(row, kind.time.name).astimezone(UTC).strftime("%Y-%m")
                    if month not in months:
                        months[month] = MonthFile(self.directory / f"{kind.name}-{month}.jsonl.gz", kind.name)
                    months[month].add(row.id, shape(row))
                for month_file in months.values():
                    month_file.commit()
            finally:
                for month_file in months.values():
                    month_file.discard()
        if not months:
            return 0, []
        _sync_directory(self.directory)
        if self.written is not None:
            self.written(kind.name)
        deleted = 0
        for month_file in months.values():
            for start in range(0, len(month_file.ids), archive.CHUNK):
                chunk = month_file.ids[start : start + archive.CHUNK]
                deleted += units.run(lambda chunk=chunk: self._delete(kind, chunk, before), what="archiving rows")
        return deleted, [m.path.name for m in months.values()]

    def _delete(self, kind: archive.Kind, ids: list[int], before: datetime) -> int:
        # How far the scorecard's counts reach, read again in the delete's transaction: an import may have had its
        # last days counted again since the rows were read.
        scored_before = self.scorecard_kept_until() if kind.name == archive.DECISIONS else None
        gone = archive.delete(kind, ids, before, scored_before)
        counts: Counter[tuple[str, str]] = Counter()
        for _id, at, outcome in gone:
            hour = archive.hour_of(at)
            counts[(kind.name, hour)] += 1
            if kind.name == archive.DECISIONS and outcome not in NOT_BACKTESTED:
                counts[(archive.BACKTESTED, hour)] += 1
        archive.count(dict(counts))
        return len(gone)


@dataclass
class MonthFile:
    """One month's archive file being written: the old file's bytes, then one gzip member of the lines it does not
    hold yet, under a temporary name until `commit` renames it over the old one."""

    path: Path
    kind: str
    ids: list[int] = field(default_factory=list)
    lines: int = 0

    def __post_init__(self) -> None:
        self.partial = self.path.with_name(self.path.name + ".partial")
        self.held = _identities(self.path, self.kind)
        self.handle = open(self.partial, "wb")  # noqa: SIM115 (closed by commit or discard)
        if self.path.exists():
            with open(self.path, "rb") as old:
                shutil.copyfileobj(old, self.handle)
        self.member = gzip.GzipFile(filename="", mode="wb", fileobj=self.handle, mtime=0)

    def add(self, row_id: int, line: dict[str, Any]) -> None:
        """The row goes (deleted after the commit); its line is written unless the file holds it already."""
        self.ids.append(row_id)
        if identity(self.kind, line) in self.held:
            return
        self.member.write(_json(line) + b"\n")
        self.lines += 1

    def commit(self) -> None:
        self.member.close()
        if self.lines == 0:
            return  # nothing new: the file stays as it is (its rows are deleted all the same)
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.replace(self.partial, self.path)

    def discard(self) -> None:
        """Whatever was not committed is dropped (the old file, if any, stays)."""
        if not self.member.closed:
            self.member.close()
        if not self.handle.closed:
            self.handle.close()
        self.partial.unlink(missing_ok=True)


def _identities(path: Path, kind: str) -> set[Any]:
    if not path.exists():
        return set()
    with gzip.open(path, "rb") as lines:
        return {identity(kind, json.loads(line)) for line in lines if line.strip()}


def _json(line: dict[str, Any]) -> bytes:
    # As the JSON columns are written: orjson, or json for what it refuses (an integer beyond 64 bits).
    try:
        return orjson.dumps(line)
    except TypeError:
        return json.dumps(line, separators=(",", ":"), ensure_ascii=False).encode()


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One archivist at a time writes the files of a directory (`svc archive` beside the scheduled run): an advisory
    lock on a file in it, held while the files are written (another waits, then finds the lines written)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _sync_directory(directory: Path) -> None:
    """The renames are on disk before any row is deleted."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read(path: Path) -> list[dict[str, Any]]:
    """The lines of an archive file (every gzip member of it), parsed: what `zcat FILE | jq` shows."""
    with gzip.open(path, "rb") as lines:
        return [json.loads(line) for line in lines if line.strip()]
