"""The delivery coordination service: configuration, the command line, and the units of work of the board.

Units of work (`svc.board`, `svc.writing`, `svc.agents`) run a state machine from `machines/` against rows
from `storage/`, inside one transaction, and raise the domain errors of `svc.errors`.
"""

__version__ = "0.1.0"
