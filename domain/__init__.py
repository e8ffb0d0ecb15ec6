"""The domain of the delivery coordination service: the units of work of the board, the writing agent,
people's accounts, the ops agents (`domain.ops`) and the shadow router (`domain.router`) — what both entry
points, the API (`api/`) and the jobs process (`jobs/`), call.

A unit of work runs a state machine from `machines/` against rows from `storage/`, inside one transaction, and
raises the domain errors of `domain.errors`; outbound calls go through `integrations/`.
"""

__version__ = "0.1.0"
