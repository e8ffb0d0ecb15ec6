"""The `svc import` command: open the database (migrated, as every command that writes does), stream the file
through the router's record-only switch (`domain/router/history.py`), count the scorecard's settled days again (as
the jobs process does every minute), print the counts on standard output and each rejected line on standard error.
Exit 0, or 1 when a line was rejected, 2 when the file or the database cannot be used."""

from __future__ import annotations

import sys
from typing import BinaryIO, TextIO

from peewee import InterfaceError, OperationalError

from domain.clock import Clock, system_clock
from domain.config import Config
from domain.router.history import import_history
from domain.router.scorecard import keep_settled_days
from domain.services import build_services
from storage import db, migrations


def run(config: Config, file: str, *, out: TextIO, err: TextIO, clock: Clock = system_clock) -> int:
    handle: BinaryIO
    try:
        handle = getattr(sys.stdin, "buffer", sys.stdin) if file == "-" else open(file, "rb")  # noqa: SIM115 (closed below)
    except OSError as exc:
        err.write(f"svc import: cannot read {file}: {exc.strerror or exc}\n")
        return 2
    try:
        db.bind(db.open_database(config.database_url, max_connections=2))
        migrations.migrate()
        router = build_services(config, clock).router
        with db.connection():
            summary = import_history(handle, lambda batch: router.receive_batch(batch, record_only=True))
            # The settled days it recorded are counted now, as the jobs process would within the minute: the
            # scorecard reads their kept counts at once, not the rows just imported, even where no jobs process runs.
            while keep_settled_days(now=clock()):
                pass
    except (OperationalError, InterfaceError) as exc:
        # A person typing the command gets the reason, not a traceback (its first line: never a query's values).
        # What was committed before stays; importing the file again skips it as duplicates.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        err.write(f"svc import: cannot use the database: {reason}; what was imported before stays (run it again)\n")
        return 2
    finally:
        if file != "-":
            handle.close()
    for rejected in summary.rejected:
        for reason in rejected.reasons:
            err.write(f"svc import: line {rejected.line}: {reason}\n")
    out.write(summary.text() + "\n")
    return 1 if summary.rejected else 0
