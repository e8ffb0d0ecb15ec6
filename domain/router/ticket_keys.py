"""Which `WORD-NUMBER` in a branch or title is a ticket key: one whose prefix the board knows.

The board knows the prefixes of its own numbered tickets (`PORT` of `PORT-12`) and those configured in
`SVC_TICKET_PREFIXES`. So `port-12-login` names PORT-12 on a board with PORT tickets, while
`dependabot/npm_and_yarn/lodash-4.17.21`, `renovate/node-18.x`, `gh-readonly-queue/main/pr-42-...`, "Fix UTF-8
handling" and "Upgrade to SHA-256" name no ticket.

Cheap on the delivery path: the board's prefixes are read in one pass over the key index and kept per process
for `TTL` seconds, not read per delivery. A prefix probe cannot use the key index portably (`LIKE 'PORT-%'` and
key ranges follow PostgreSQL's collation, and with a non-C locale neither uses the btree index), and the set
changes only when a ticket with a new prefix is created, which people do rarely. A candidate the cached set does
not know is then looked up by its exact key (one indexed probe for all of them), so a ticket created a moment
ago counts at once, in this process and in every other; what can lag by up to `TTL` is only a key of a brand-new
prefix whose own ticket is not on the board.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from domain.router.senders.payloads import key_prefix
from storage import tickets

TTL = 30.0


class KnownTicketKeys:
    """A `KnownKeys` for the live board; call it inside a connection (the router's unit of work)."""

    def __init__(
        self, configured: frozenset[str], *, ttl: float = TTL, monotonic: Callable[[], float] = time.monotonic
    ):
        self.configured = frozenset(p.upper() for p in configured)
        self.ttl = ttl
        self.monotonic = monotonic
        self._board: frozenset[str] = frozenset()
        self._read_at: float | None = None
        self._lock = threading.Lock()

    def __call__(self, candidates: Sequence[str]) -> set[str]:
        found = {c for c in candidates if key_prefix(c) in self.configured}
        rest = [c for c in candidates if c not in found]
        if rest:
            board = self._board_prefixes()
            found.update(c for c in rest if key_prefix(c) in board)
            rest = [c for c in rest if c not in found]
        if rest:
            on_board = tickets.existing_keys(set(rest))
            if on_board:
                found |= on_board
                with self._lock:
                    self._board = self._board | {key_prefix(k) for k in on_board}
        return found

    def _board_prefixes(self) -> frozenset[str]:
        now = self.monotonic()
        with self._lock:
            if self._read_at is not None and now - self._read_at < self.ttl:
                return self._board
        prefixes = frozenset(tickets.numbered_key_prefixes())
        with self._lock:
            self._board, self._read_at = prefixes, now
        return prefixes
