"""The jobs process (`svc jobs`), the second entry point beside the API: its clock and workers, the scheduled agents
of `domain/ops/` and the poller on their UTC schedules, and the outbox delivered after commit."""
