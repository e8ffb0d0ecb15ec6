"""The `svc replay` command: pick the board (database or snapshot file) and the policy, stream the file, print the
summary. Against the database, the policy is the one in force there; against a snapshot (no database needed), the
first policy of the environment (`SVC_ROUTER_ALLOWLIST`, `SVC_RETRY_BUDGET`). `--allowlist` and `--retry-budget`
change it either way."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from peewee import InterfaceError, OperationalError, ProgrammingError

import contracts
from domain.clock import system_clock
from domain.config import Config
from domain.policy.document import Policy
from domain.policy.in_force import PolicyInForce
from domain.router.board_view import SnapshotBoardView, dump_snapshot
from domain.router.replay import replay
from storage import db


def run(
    config: Config,
    file: str | None,
    *,
    snapshot: str | None,
    save_snapshot: str | None,
    with_envelope: bool,
    out: TextIO,
    err: TextIO,
    allowlist: frozenset[str] | None = None,
    retry_budget: int | None = None,
) -> int:
    now = system_clock()
    changes = {"allowlist": allowlist, "retry_budget": retry_budget}
    try:
        return _run(config, file, snapshot, save_snapshot, with_envelope, out, err, now, changes)
    except NoBoard as exc:
        err.write(f"svc replay: {exc}\n")
        return 2


def _run(config, file, snapshot, save_snapshot, with_envelope, out, err, now, changes) -> int:
    if save_snapshot:
        view, _ = _from_database(config)
        Path(save_snapshot).write_text(dump_snapshot(view, taken_at=now) + "\n", encoding="utf-8")
        err.write(f"svc replay: wrote the board as it is now to {save_snapshot}\n")
        return 0
    if not file:
        err.write("svc replay: name a file of envelopes (JSON lines), or '-' for stdin\n")
        return 2
    if snapshot:
        try:
            document = json.loads(Path(snapshot).read_text(encoding="utf-8"))
            view = SnapshotBoardView.from_document(contracts.check("board-snapshot.json", document))
        except (OSError, ValueError) as exc:
            err.write(f"svc replay: cannot use the snapshot {snapshot}: {exc}\n")
            return 2
        except contracts.ContractViolation as exc:
            for v in exc.violations:
                err.write(f"{snapshot}: {v.path or '/'}: {v.message}\n")
            return 2
        board = f"the snapshot {snapshot}"
        policy = Policy.from_config(config)
    else:
        view, policy = _from_database(config)
        board = "the board as it is now (read once; nothing is written)"
    policy = policy.changed(**changes)
    try:
        handle = sys.stdin if file == "-" else open(file, encoding="utf-8")  # noqa: SIM115 (closed below)
    except OSError as exc:
        err.write(f"svc replay: cannot read {file}: {exc}\n")
        return 2
    try:
        summary = replay(handle, view, policy, out, with_envelope=with_envelope)
    finally:
        if handle is not sys.stdin:
            handle.close()
    err.write(f"svc replay: {summary.text()}; against {board}\n")
    return 0


def _from_database(config: Config) -> tuple[SnapshotBoardView, Policy]:
    """The board as it is now, and the policy in force (the environment's first policy while none is stored)."""
    db.bind(db.open_database(config.database_url, max_connections=2))
    try:
        with db.connection():
            return SnapshotBoardView.from_database(), PolicyInForce(Policy.from_config(config))()
    except (OperationalError, ProgrammingError, InterfaceError) as exc:
        raise NoBoard(
            f"cannot read the board from the database ({type(exc).__name__}); start the service once "
            "(or run svc migrate) there, or replay against a file with --snapshot"
        ) from exc


class NoBoard(Exception):
    """The database holds no board to replay against."""
