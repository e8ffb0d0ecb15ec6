"""People's accounts, the units of work over `storage/accounts.py`: what `svc user ...` runs, and checking a
person's password.

A password is kept only as its argon2id hash, made at the cost the configuration names (`Passwords`; by default
argon2-cffi's, RFC 9106's second recommended profile: 64 MiB, 3 passes): checking one costs tens of milliseconds on
purpose, which is why the API remembers credentials it has checked (see `api.auth.PeopleCredentials`) instead of
checking them on every request. A hash carries its own parameters, so a hash made at any cost keeps verifying after
the cost changes.
"""

from __future__ import annotations

import re
import secrets
import threading
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from domain import units
from domain.clock import Clock, system_clock
from domain.config import Config
from domain.errors import Conflict, DomainError, NotFound
from storage import accounts
from storage.db import connection
from storage.models import Account

VIEWER = "viewer"
OPERATOR = "operator"
WORKER = "worker"
ROLES = (VIEWER, OPERATOR, WORKER)
ROLE_MEANING = {
    VIEWER: "reads everything (every GET, the board, ticket pages, decisions) and changes nothing",
    OPERATOR: "does everything people do: board actions, ops endpoints, the automation toggle, the wallet",
    WORKER: "a machine in a bay: claims dispatch jobs, heartbeats, hands back results, reads its own jobs and their "
    "tickets, and nothing else",
}
MIN_PASSWORD = 8  # as for SVC_BASIC_AUTH
MAX_PASSWORD = 1024  # argon2 takes any length; a bound keeps a hostile header from costing more than a hash
# Matched whole (fullmatch): "$" would also accept a trailing line break, and "ci\n" reads as "ci" on a page.
NAME = re.compile(r"[a-z0-9][a-z0-9._@-]{0,63}")
# A bay is a slot: the names `contracts/common.json` allows a slot (matched whole, for the same reason).
BAY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# Timelines name machines by these actors (api/auth.py): a person called "ci" would read as the CI secret.
MACHINE_ACTORS = frozenset({"anonymous", "ci", "github", "gitlab", "linear"})
# At most this many password checks run at once in a process: each holds its hash's memory cost (64 MiB by
# default) for its tens of milliseconds.
CONCURRENT_CHECKS = 2


class AccountRefused(DomainError):
    """A name, role or password that cannot be an account's (the message says why, for a person)."""


@dataclass(frozen=True)
class Person:
    """Who a checked password belongs to, and the hash it was checked against (it changes with the password)."""

    name: str
    role: str
    password_hash: str


class Passwords:
    """How one process hashes and checks people's passwords: argon2id at the cost its configuration names
    (`SVC_PASSWORD_TIME_COST`, `SVC_PASSWORD_MEMORY_KIB`, `SVC_PASSWORD_PARALLELISM`), at most `CONCURRENT_CHECKS`
    checks at once, and an unknown name checked against a decoy made at that cost. Built once by whatever builds the
    process (the app, `svc user`) and handed to what hashes or checks."""

    def __init__(self, hasher: PasswordHasher):
        self.hasher = hasher
        self._checking = threading.BoundedSemaphore(CONCURRENT_CHECKS)
        self._decoy_lock = threading.Lock()
        self._decoy: str | None = None

    @classmethod
    def from_config(cls, config: Config) -> Passwords:
        return cls(
            PasswordHasher(
                time_cost=config.password_time_cost,
                memory_cost=config.password_memory_kib,
                parallelism=config.password_parallelism,
            )
        )

    def hash_of(self, password: str) -> str:
        """The encoded argon2id hash of `password`, its salt and parameters inside: slow, so never in a transaction."""
        return self.hasher.hash(password)

    def verify(self, password_hash: str, password: str) -> bool:
        """Whether `password` is the one `password_hash` was made from, at the parameters the hash names (whatever
        this process's own are); waits while `CONCURRENT_CHECKS` others run."""
        with self._checking:
            try:
                return self.hasher.verify(password_hash, password)
            except (VerificationError, InvalidHashError):
                return False

    def decoy(self) -> str:
        """A hash of a random password, made once at this process's cost: what an unknown name is checked against."""
        with self._decoy_lock:
            if self._decoy is None:
                self._decoy = self.hasher.hash(secrets.token_urlsafe(16))
            return self._decoy


def check_name(name: str, *, reserved: frozenset[str] = frozenset()) -> None:
    if not NAME.fullmatch(name):
        raise AccountRefused(
            f"{name!r} cannot be an account name: use 1 to 64 lower-case letters, digits and . _ @ -, "
            "starting with a letter or digit"
        )
    if name in MACHINE_ACTORS or name in reserved:
        raise AccountRefused(f"{name!r} is the name of built-in credentials; choose another name")


def check_bay(bay: str) -> None:
    """A worker's bay is a slot's name (`contracts/common.json`'s `slot_name`)."""
    if not BAY.fullmatch(bay):
        raise AccountRefused(
            f"{bay!r} cannot be a bay: use 1 to 64 letters, digits and . _ -, starting with a letter or digit"
        )


def bay_of(name: str, role: str, bay: str | None) -> str | None:
    """The bay a `role` account called `name` gets: for a worker, `bay`, else its own name; none for people."""
    if role != WORKER:
        if bay is not None:
            raise AccountRefused("only a worker has a bay (--bay goes with --role worker)")
        return None
    chosen = bay if bay is not None else name
    if bay is None and not BAY.fullmatch(name):
        raise AccountRefused(f"{name!r} cannot be a bay's name too: give the worker its bay (--bay BAY)")
    check_bay(chosen)
    return chosen


def check_role(role: str) -> None:
    if role not in ROLES:
        raise AccountRefused(f"{role!r} is not a role; roles: {', '.join(ROLES)}")


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise AccountRefused(f"the password must be at least {MIN_PASSWORD} characters long")
    if len(password) > MAX_PASSWORD:
        raise AccountRefused(f"the password must be at most {MAX_PASSWORD} characters long")
    if any(c in password for c in "\r\n\x00"):
        raise AccountRefused("the password cannot contain a line break or NUL")


def add(
    name: str,
    role: str,
    password: str,
    *,
    passwords: Passwords,
    bay: str | None = None,
    reserved: frozenset[str] = frozenset(),
    clock: Clock = system_clock,
) -> Account:
    """Create an account; `reserved` holds names taken by other credentials (the bootstrap user). A worker gets its
    bay (`bay`, else its name). Every account added is a new principal, even under the name of one removed: what
    the one before did (the jobs it claimed) is not its own."""
    check_name(name, reserved=reserved)
    check_role(role)
    its_bay = bay_of(name, role, bay)
    check_password(password)
    password_hash = passwords.hash_of(password)  # slow: outside the transaction

    def work() -> Account:
        if accounts.exists(name):
            raise Conflict(f"an account called {name!r} exists already (change its password with: svc user passwd)")
        return accounts.insert(
            name=name,
            role=role,
            password_hash=password_hash,
            at=clock(),
            principal=secrets.token_hex(16),
            bay=its_bay,
        )

    return units.run(work, what=f"adding account {name}")


def change_password(name: str, password: str, *, passwords: Passwords, clock: Clock = system_clock) -> None:
    """A new password; every API process stops taking the old one within `api.auth.RECHECK_SECONDS`."""
    check_password(password)
    password_hash = passwords.hash_of(password)

    def work() -> None:
        if not accounts.set_password(name, password_hash, at=clock()):
            raise NotFound("account", name)

    units.run(work, what=f"changing the password of {name}")


def change_role(name: str, role: str, *, bay: str | None = None) -> None:
    """A new role; an account made a worker keeps the bay it had, else gets `bay` (else its name)."""
    check_role(role)
    its_bay = bay_of(name, role, bay) if role == WORKER else None
    if bay is not None and role != WORKER:
        raise AccountRefused("only a worker has a bay (--bay goes with the role worker)")

    def work() -> None:
        if not accounts.set_role(name, role):
            raise NotFound("account", name)
        if its_bay is not None:
            accounts.set_bay(name, its_bay, unless_set=bay is None)

    units.run(work, what=f"changing the role of {name}")


def remove(name: str) -> None:
    """Delete the account; what it did stays attributed to its name on timelines and runs."""

    def work() -> None:
        if not accounts.delete(name):
            raise NotFound("account", name)

    units.run(work, what=f"removing account {name}")


def everyone() -> list[Account]:
    with connection():
        return accounts.everyone()


def current(name: str) -> Account | None:
    """The account as stored now (one indexed read)."""
    with connection():
        return accounts.get(name)


def check(name: str, password: str, *, passwords: Passwords) -> Person | None:
    """The account whose name and password these are, or None. Slow (argon2id) whatever the answer: an unknown
    name is checked against a decoy hash, so the time taken does not tell which names exist."""
    account = current(name) if NAME.fullmatch(name) else None
    if len(password) > MAX_PASSWORD:
        return None
    if account is None:
        passwords.verify(passwords.decoy(), password)
        return None
    if not passwords.verify(account.password_hash, password):
        return None
    return Person(account.name, account.role, account.password_hash)
