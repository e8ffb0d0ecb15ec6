"""`svc import` with another batch size (envelopes per transaction): what the import's batched commits are worth.

    python bench/import_batch.py FILE.jsonl BATCH

The same steps as `svc/import_command.py` (the database of the environment, migrated; the router's record-only
switch), with `BATCH` in place of the command's own."""

import sys

from domain.clock import system_clock
from domain.config import Config
from domain.router.history import import_history
from domain.services import build_services
from storage import db, migrations

config = Config.from_env()
db.bind(db.open_database(config.database_url, max_connections=2))
migrations.migrate()
router = build_services(config, system_clock).router
with db.connection(), open(sys.argv[1], "rb") as lines:
    summary = import_history(lines, lambda batch: router.receive_batch(batch, record_only=True), batch=int(sys.argv[2]))
print(summary.text())
