"""Live dispatch: the switch, jobs, workers."""
