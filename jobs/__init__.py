"""The jobs process: ops agents on their UTC schedules, outbox delivery, the poller and the shadow router."""
