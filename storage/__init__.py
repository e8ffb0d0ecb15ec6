"""Persistence: peewee models behind a `DatabaseProxy`, migrations, and the queries the service runs.

Only this package writes SQL. Units of work in `svc/` and `jobs/` open a transaction with
`storage.db.transaction()` and call the functions here inside it.
"""
