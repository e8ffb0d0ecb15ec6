"""Persistence: peewee models behind a `DatabaseProxy`, migrations, and the queries the service runs.

Only this package writes SQL. There are two ways to write, on purpose:

- `domain.units.run(work)` (through `storage.db.write`) for the units of work a request makes: retried on a lost
  compare-and-swap, and on SQLite committed together with other threads' units (group commit);
- `storage.db.transaction()` directly, for the jobs process's steps (a pulse, a delivery, a steward run):
  they run one at a time at their own pace, so there is nothing to group and nothing to retry.

The hot statements are composed once (`storage.statements`); the rest use peewee's query builder.
"""
