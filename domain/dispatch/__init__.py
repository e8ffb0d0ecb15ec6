"""Live dispatch: the switch over it (`switch.py`) and the jobs live rules queue for workers in bays (`jobs.py`)."""
