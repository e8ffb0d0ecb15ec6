"""Declarative state machines (python-statemachine): the generic ticket, the writing ticket, the automation toggle.

Machines are pure: they know stages and the moves between them, never the database. The units of work in
`domain/` run a machine against a ticket and persist the result with a compare-and-swap.
"""

from machines.errors import TransitionForbidden

__all__ = ["TransitionForbidden"]
