"""`python -m svc`: the `svc` command."""

from svc.cli import entry

raise SystemExit(entry())
