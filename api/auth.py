"""The credential schemes: the shared CI secret header, HTTP basic, and the webhook signatures of the forge
(GitHub's HMAC-SHA256 of the raw body, GitLab's token) and the tracker (Linear's HMAC-SHA256 of the raw body).
Every secret is compared in constant time; a scheme whose secret is not configured refuses every request.

HTTP basic credentials are either the bootstrap operator's (`SVC_BASIC_AUTH`) or a person's account (`svc user
add`), checked by `PeopleCredentials`. Every identity carries a role; a viewer may read and change nothing.

Failed credentials are counted per client address: after `FAILURE_LIMIT` failures within `WINDOW` seconds,
that address gets 429 with `Retry-After` until the window has passed. The count lives in this process; a wrong
password for an account counts like any other failure. Only credentials that were given and are wrong count: a
request that gives none (no `Authorization` header; no CI secret header; no signature or token header of a
sender) is challenged (401) and not counted, since that is how a browser asks first for every page and file
before it sends the password it was given. A correctly signed delivery outside its sender's replay window is
refused later, when the router reads it (401 `stale-delivery`), and is not counted here: `api/errors.py` says why.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import math
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

import falcon

from api.errors import Problem
from api.operations import BASIC, CI, CI_OR_BASIC, FORGE_SIGNATURE, PUBLIC, TRACKER_SIGNATURE
from domain import accounts
from domain.accounts import OPERATOR, VIEWER
from domain.config import Config
from domain.router import deliveries
from domain.router.senders import github, gitlab, linear
from domain.router.senders.signatures import same_secret

CI_HEADER = "X-Svc-CI-Secret"
REALM = 'Basic realm="svc", charset="UTF-8"'
FAILURE_LIMIT = 10
WINDOW = 60.0
# A person's checked credentials are remembered for REMEMBER_SECONDS at most, and compared with their account's
# row at most every RECHECK_SECONDS: removing an account or changing its password or role takes effect on every
# API process within RECHECK_SECONDS, while a request in between costs an HMAC and a dictionary look-up.
REMEMBER_SECONDS = 60.0
RECHECK_SECONDS = 2.0
MAX_REMEMBERED = 10_000
# At most this many requests wait for a password check in a process, their own or the same credentials' (and
# accounts.CONCURRENT_CHECKS checks run at once). Another request with credentials not remembered is answered 429 at
# once: a request waiting for argon2 holds a server thread, and a flood of wrong passwords from many addresses would
# otherwise hold every thread and stall even the requests whose credentials are remembered.
CHECKS_ADMITTED = 4


@dataclass(frozen=True)
class Identity:
    """Who made the request: `actor` goes onto timelines and audit entries; a `viewer` may change nothing."""

    scheme: str
    actor: str
    role: str = OPERATOR

    @property
    def may_change(self) -> bool:
        return self.role != VIEWER


class FailedCredentials:
    """Per-address sliding window of credential failures."""

    def __init__(
        self, *, limit: int = FAILURE_LIMIT, window: float = WINDOW, monotonic: Callable[[], float] = time.monotonic
    ):
        self.limit = limit
        self.window = window
        self.monotonic = monotonic
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def retry_after(self, address: str) -> int | None:
        """Seconds until `address` may try again, or None when it is not locked out."""
        now = self.monotonic()
        with self._lock:
            failures = self._failures.get(address)
            if not failures:
                return None
            while failures and now - failures[0] >= self.window:
                failures.popleft()
            if not failures:
                del self._failures[address]
                return None
            if len(failures) < self.limit:
                return None
            return max(1, math.ceil(self.window - (now - failures[0])))

    def record(self, address: str) -> None:
        now = self.monotonic()
        with self._lock:
            failures = self._failures.setdefault(address, deque())
            failures.append(now)
            while len(failures) > self.limit:
                failures.popleft()
            if len(self._failures) > 100_000:  # a flood of addresses must not grow memory without bound
                self._failures.pop(next(iter(self._failures)))


@dataclass(frozen=True)
class _Remembered:
    identity: Identity
    password_hash: str  # the account's hash when the password was checked: a new password changes it
    verified_at: float
    checked_at: float  # when the account's row was last compared


class _Pending:
    """A check of one set of credentials under way: requests with the same ones wait for its answer."""

    def __init__(self):
        self.done = threading.Event()
        self.identity: Identity | None = None
        self.failure: BaseException | None = None  # why the check could not answer (the database, say)
        self.waiting = 0


class CheckFailed(Exception):
    """The password check a request waited for could not answer; its cause (`__cause__`) is why, so the request is
    answered as the one that ran the check was: an outage of the database is a 503 (`api/errors.py`)."""


def _too_many_checks() -> Problem:
    """Not a failure of the credentials (nothing is counted): this process cannot check them just now."""
    return Problem(
        429,
        "too-many-requests",
        "too many sign-ins are being checked right now; retry in a second",
        headers={"Retry-After": "1"},
    )


class PeopleCredentials:
    """People's basic credentials: checked against their account (argon2id, slow on purpose) once, then
    remembered by this process.

    An entry is keyed by an HMAC of the credentials under a key drawn when the process starts and kept only in
    its memory, so the table holds no password. A hit younger than `recheck` seconds costs the HMAC and a
    dictionary look-up; an older one re-reads the account's row (one indexed select) and is dropped if the account
    is gone or its password hash differs; after `remember` seconds the password is checked with argon2id anew.
    """

    def __init__(
        self,
        passwords: accounts.Passwords,
        *,
        remember: float = REMEMBER_SECONDS,
        recheck: float = RECHECK_SECONDS,
        limit: int = MAX_REMEMBERED,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self.passwords = passwords
        self.remember = remember
        self.recheck = recheck
        self.limit = limit
        self.monotonic = monotonic
        self._key = secrets.token_bytes(32)
        self._entries: dict[bytes, _Remembered] = {}
        self._lock = threading.Lock()
        self._admitted = threading.BoundedSemaphore(CHECKS_ADMITTED)
        # One check at a time per credentials: a page's parallel requests (or a flood of one wrong password) wait
        # for the first one's answer instead of each running argon2 in turn.
        self._checking: dict[bytes, _Pending] = {}

    def identify(self, given: bytes) -> Identity | None:
        """The person whose `name:password` these are, or None."""
        key = hmac.digest(self._key, given, "sha256")
        entry = self._entries.get(key)
        if entry is not None:
            if self.monotonic() - entry.checked_at < self.recheck:
                return entry.identity
            renewed = self._recheck(key, entry)
            if renewed is not None:
                return renewed.identity
        # Still remembered (its account unchanged) but due for argon2id anew: only people who have these credentials
        # get here, so they wait for the check like before rather than take one of the places a flood can fill.
        return self._check(key, given, known=key in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def waiting(self) -> int:
        """How many requests wait for the answer of a check of the same credentials."""
        with self._lock:
            return sum(pending.waiting for pending in self._checking.values())

    def _recheck(self, key: bytes, entry: _Remembered) -> _Remembered | None:
        now = self.monotonic()
        account = accounts.current(entry.identity.actor)
        if account is None or not same_secret(account.password_hash, entry.password_hash):
            self._forget(key)
            return None
        if now - entry.verified_at >= self.remember:
            return None  # kept until the password is checked anew
        renewed = replace(entry, identity=replace(entry.identity, role=account.role), checked_at=now)
        with self._lock:  # never beside an eviction walking the table
            self._entries[key] = renewed
        return renewed

    def _check(self, key: bytes, given: bytes, *, known: bool = False) -> Identity | None:
        name, sep, password = given.partition(b":")
        try:
            name_text, password_text = name.decode(), password.decode()
        except UnicodeDecodeError:
            return None
        if not sep or not name_text or not password_text:
            return None
        if known:
            return self._check_admitted(key, name_text, password_text)
        # Waiting for a check holds a server thread, whether for this request's own or for the same credentials'.
        if not self._admitted.acquire(blocking=False):
            raise _too_many_checks()
        try:
            return self._check_admitted(key, name_text, password_text)
        finally:
            self._admitted.release()

    def _check_admitted(self, key: bytes, name: str, password: str) -> Identity | None:
        with self._lock:
            pending = self._checking.get(key)
            first = pending is None
            if first:
                pending = self._checking[key] = _Pending()
            else:
                pending.waiting += 1
        if not first:
            pending.done.wait()
            if pending.failure is not None:
                raise CheckFailed("the password check this request waited for failed") from pending.failure
            return pending.identity
        try:
            pending.identity = self._check_now(key, name, password)
            return pending.identity
        except BaseException as exc:
            pending.failure = exc
            raise
        finally:
            with self._lock:
                self._checking.pop(key, None)
            pending.done.set()

    def _check_now(self, key: bytes, name: str, password: str) -> Identity | None:
        entry = self._entries.get(key)  # checked by a request that finished while this one started
        if entry is not None and self.monotonic() - entry.checked_at < self.recheck:
            return entry.identity
        person = accounts.check(name, password, passwords=self.passwords)
        if person is None:
            self._forget(key)
            return None
        now = self.monotonic()
        identity = Identity(BASIC, person.name, person.role)
        self._remember(key, _Remembered(identity, person.password_hash, verified_at=now, checked_at=now))
        return identity

    def _remember(self, key: bytes, entry: _Remembered) -> None:
        with self._lock:
            if len(self._entries) >= self.limit:
                stale = [k for k, e in self._entries.items() if entry.verified_at - e.verified_at >= self.remember]
                for k in stale:
                    del self._entries[k]
                while len(self._entries) >= self.limit:
                    self._entries.pop(next(iter(self._entries)))
            self._entries[key] = entry

    def _forget(self, key: bytes) -> None:
        with self._lock:
            self._entries.pop(key, None)


class Authenticator:
    def __init__(self, config: Config, failures: FailedCredentials, people: PeopleCredentials | None = None):
        self.ci_secret = config.ci_webhook_secret
        self.basic = config.basic_auth.encode() if config.basic_auth else None
        self.basic_user = config.basic_user
        self.config = config
        self.failures = failures
        self.people = people if people is not None else PeopleCredentials(accounts.Passwords.from_config(config))

    def check(self, req: falcon.Request, scheme: str) -> Identity:
        """Identify the request under `scheme` or raise 401 (429 while the client is locked out)."""
        if scheme == PUBLIC:
            return Identity(PUBLIC, "anonymous")
        address = req.remote_addr or "unknown"
        wait = self.failures.retry_after(address)
        if wait is not None:
            raise Problem(
                429,
                "too-many-requests",
                "too many failed credentials from this address; wait and retry",
                headers={"Retry-After": str(wait)},
            )
        identity = self._identify(req, scheme)
        if identity is None:
            given = _given(req, scheme)
            if given:  # wrong credentials count toward the lockout; a request that gave none is only challenged
                self.failures.record(address)
            headers = {"WWW-Authenticate": REALM} if scheme in {BASIC, CI_OR_BASIC} else None
            detail = _why_wrong(req, scheme, given, self.config) if given else _what_is_needed(req, scheme)
            raise Problem(401, "unauthorized", detail, headers=headers)
        return identity

    def _identify(self, req: falcon.Request, scheme: str) -> Identity | None:
        if scheme == FORGE_SIGNATURE:
            return self._webhook(req, "forge", scheme)
        if scheme == TRACKER_SIGNATURE:
            return self._webhook(req, "tracker", scheme)
        if scheme in {CI, CI_OR_BASIC}:
            given = req.get_header(CI_HEADER)
            if given is not None and self.ci_secret and same_secret(given, self.ci_secret):
                return Identity(CI, "ci")
        if scheme in {BASIC, CI_OR_BASIC}:
            return self._basic_identity(req)
        return None

    def _webhook(self, req: falcon.Request, endpoint: str, scheme: str) -> Identity | None:
        """The sender whose credential verified the delivery (`github`, `gitlab`, `linear`) is the identity's actor,
        carried to the router: decided here, once, never from a header anyone can set."""
        sender = deliveries.authenticate(endpoint, req.get_header, _raw_body(req), self.config)
        return Identity(scheme, sender) if sender is not None else None

    def _basic_identity(self, req: falcon.Request) -> Identity | None:
        """The bootstrap operator (`SVC_BASIC_AUTH`, compared in constant time) or a person's account."""
        header = req.get_header("Authorization")
        if not header:
            return None
        kind, _, token = header.partition(" ")
        if kind.lower() != "basic" or not token:
            return None
        try:
            given = base64.b64decode(token.strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
        if self.basic is not None and same_secret(given, self.basic):
            return Identity(BASIC, self.basic_user, OPERATOR)
        return self.people.identify(given)


def _raw_body(req: falcon.Request) -> bytes:
    # The guard reads the exact bytes before credentials are checked for operations declared raw_body.
    return getattr(req.context, "raw_body", None) or b""


# The headers that carry each scheme's credentials: a request with none of them gave no credentials at all.
_CREDENTIAL_HEADERS = {
    BASIC: ("Authorization",),
    CI: (CI_HEADER,),
    CI_OR_BASIC: ("Authorization", CI_HEADER),
    FORGE_SIGNATURE: (github.SIGNATURE_HEADER, gitlab.TOKEN_HEADER),
    TRACKER_SIGNATURE: (linear.SIGNATURE_HEADER,),
}


def _given(req: falcon.Request, scheme: str) -> tuple[str, ...]:
    """The credential headers of `scheme` this request carries (with a value)."""
    return tuple(name for name in _CREDENTIAL_HEADERS.get(scheme, ()) if req.get_header(name))


_BASIC_WORDS = "HTTP basic credentials (a person's account, or SVC_BASIC_AUTH)"
_CI_WORDS = f"the {CI_HEADER} header with the CI webhook secret (SVC_CI_WEBHOOK_SECRET)"
_GITHUB_WORDS = (
    f"a GitHub {github.SIGNATURE_HEADER} signature (the HMAC-SHA256 of the body) made with the GitHub webhook "
    "secret (SVC_GITHUB_WEBHOOK_SECRET)"
)
_GITLAB_WORDS = f"a GitLab {gitlab.TOKEN_HEADER} equal to the GitLab webhook token (SVC_GITLAB_WEBHOOK_TOKEN)"
_LINEAR_WORDS = (
    f"a {linear.SIGNATURE_HEADER} signature (the HMAC-SHA256 of the body) made with the tracker webhook secret "
    "(SVC_TRACKER_WEBHOOK_SECRET)"
)


def _what_is_needed(req: falcon.Request, scheme: str) -> str:
    """The challenge: the request gave no credentials of the kind this endpoint takes (not counted as a failure)."""
    if scheme == FORGE_SIGNATURE:
        return f"no signature: this delivery carries neither {_GITHUB_WORDS}, nor {_GITLAB_WORDS}"
    if scheme == TRACKER_SIGNATURE:
        return f"no signature: this delivery carries no {linear.SIGNATURE_HEADER}; the endpoint needs {_LINEAR_WORDS}"
    if scheme == CI:
        return f"no credentials: this endpoint needs {_CI_WORDS}"
    if scheme == CI_OR_BASIC:
        return f"no credentials: this endpoint needs {_BASIC_WORDS} or {_CI_WORDS}"
    besides = f" (the {CI_HEADER} header does not open it)" if req.get_header(CI_HEADER) else ""
    return f"no credentials: this endpoint needs {_BASIC_WORDS}{besides}"


def _why_wrong(req: falcon.Request, scheme: str, given: tuple[str, ...], config: Config) -> str:
    """What was wrong with the credentials the request gave (counted as a failure), naming the right ones."""
    if scheme == FORGE_SIGNATURE:
        # The signature decides when both are there (`deliveries.authenticate`): it is GitHub's or no one's.
        if github.SIGNATURE_HEADER in given:
            what = f"wrong signature: the {github.SIGNATURE_HEADER} does not match this body"
            return _wrong_webhook(what, "GitHub", _GITHUB_WORDS, config.github_secret)
        what = f"wrong token: the {gitlab.TOKEN_HEADER} is not the GitLab webhook token"
        return _wrong_webhook(what, "GitLab", _GITLAB_WORDS, config.gitlab_token)
    if scheme == TRACKER_SIGNATURE:
        what = f"wrong signature: the {linear.SIGNATURE_HEADER} does not match this body"
        return _wrong_webhook(what, "Linear", _LINEAR_WORDS, config.tracker_webhook_secret)
    wrong = []
    if "Authorization" in given:
        kind = (req.get_header("Authorization") or "").partition(" ")[0]
        wrong.append(
            "the user name or the password is wrong (or the account was removed)"
            if kind.lower() == "basic"
            else "the Authorization header does not carry HTTP basic credentials"
        )
    if CI_HEADER in given:
        wrong.append(f"the {CI_HEADER} header is not the CI webhook secret")
    needed = {CI: _CI_WORDS, CI_OR_BASIC: f"{_BASIC_WORDS} or {_CI_WORDS}"}.get(scheme, _BASIC_WORDS)
    return f"wrong credentials: {'; and '.join(wrong)}. This endpoint needs {needed}"


def _wrong_webhook(what: str, sender: str, needed: str, secret: str | None) -> str:
    if not secret:
        return (
            f"{what}: no secret for {sender} is configured here, so the endpoint refuses every delivery {sender} sends"
        )
    return f"{what}; the endpoint needs {needed}"
