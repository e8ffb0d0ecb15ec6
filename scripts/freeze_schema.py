"""Freeze a released schema version: write the DDL the models declare to `storage/frozen/v<N>.<backend>.sql`.

Run it when a release carries a new schema version (N defaults to the newest migration's), from a checkout
whose models are that release's. The files are then never edited: `tests/storage/test_migrations.py` builds a
database from each of them and checks that it upgrades to exactly what the models declare.

    .venv/bin/python scripts/freeze_schema.py            # freeze the newest version
    .venv/bin/python scripts/freeze_schema.py --check    # exit 1 if the newest frozen files differ from the models
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from peewee import PostgresqlDatabase, SqliteDatabase

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the models of this checkout, not of an installed copy

from storage import migrations  # noqa: E402


def render(version: int, backend: str, statements: list[str], commit: str) -> str:
    name = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}[backend]
    header = [
        f"-- svc schema version {version}, {name}: the DDL of this release's tables and indexes. Frozen: never edit.",
        f"-- Written by scripts/freeze_schema.py from storage/models.py at {commit}.",
    ]
    return "\n".join(header + [statement + ";" for statement in statements]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", type=int, default=migrations.MIGRATIONS[-1][0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    differs = False
    for backend, database in (("sqlite", SqliteDatabase(None)), ("postgresql", PostgresqlDatabase(None))):
        statements = migrations.declared_ddl(database)
        path = ROOT / "storage" / "frozen" / f"v{args.version}.{backend}.sql"
        if args.check:
            if not path.exists() or migrations.frozen_ddl(args.version, backend) != statements:
                print(f"freeze_schema: {path.relative_to(ROOT)} differs from the models", file=sys.stderr)
                differs = True
            continue
        path.write_text(render(args.version, backend, statements, commit), encoding="utf-8")
        print(f"freeze_schema: wrote {path.relative_to(ROOT)} ({len(statements)} statements)")
    return 1 if differs else 0


if __name__ == "__main__":
    raise SystemExit(main())
