"""Exit 0 when the PostgreSQL server at argv[1] accepts a connection within two seconds, else 1."""

import sys

import psycopg

try:
    with psycopg.connect(sys.argv[1], connect_timeout=2):
        pass
except psycopg.Error as exc:
    print(f"postgres_reachable: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}", file=sys.stderr)
    raise SystemExit(1) from None
