"""The ops agents: the daily pulse, the weekly digest, the slot steward and idle reclaim, their schedules, the
agents strip and the runs every agent records."""
