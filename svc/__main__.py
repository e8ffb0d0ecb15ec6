"""`python -m svc`: the `svc` command."""

from svc.cli import main

raise SystemExit(main())
