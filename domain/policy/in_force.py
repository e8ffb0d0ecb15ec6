"""The policy in force: the newest stored version (the rows: `storage/policy_versions.py`; their history and the
judging of a change: `domain/router/policy_versions.py`), what every routed event and every claim applies.

Versions are rows that never change, and the newest is the one in force, so every API and jobs process applies a new
version from its next event on: each reader asks for the newest row's id and version (one indexed one-row
statement, inside its own unit of work) and parses the document only when the version is one it has not held
before. A decision therefore records exactly the policy its transaction saw, and a claim counts the fleet size of
that same policy.
"""

from __future__ import annotations

from domain.policy.document import Policy
from storage import policy_versions as rows


class PolicyInForce:
    """The policy each routed event applies: the newest version, checked per event by its id and version alone,
    parsed and compiled once per version and held here (a version is an immutable row: no writer can make what is
    held differ from what is stored). Before any version is stored, `fallback` (the first policy, from the
    environment) applies, and is what the first start stores."""

    def __init__(self, fallback: Policy):
        self.fallback = fallback
        self._held: tuple[str, Policy] | None = None

    def __call__(self) -> Policy:
        """Call inside a unit of work (or a connection)."""
        found = rows.newest_version()
        if found is None:
            return self.fallback
        version_id, version = found
        held = self._held
        if held is not None and held[0] == version:
            return held[1]
        row = rows.get(version_id)
        policy = Policy.from_document(row.document) if row is not None else self.fallback
        self._held = (version, policy)
        return policy
