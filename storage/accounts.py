"""Account rows, under `domain/accounts.py`: people's logins, each with a role and the hash of its password; a
worker's bay, and what it last did and was refused (`domain/dispatch/workers.py`)."""

from __future__ import annotations

from datetime import datetime

from storage import statements
from storage.models import Account
from storage.paging import decode_cursor, page_of


def get(name: str) -> Account | None:
    """The account called `name` (one indexed read: the API re-checks remembered credentials with it)."""
    return statements.select_one(Account, {"name": name})


def exists(name: str) -> bool:
    return Account.select(Account.name).where(Account.name == name).exists()


def insert(*, name: str, role: str, password_hash: str, at: datetime, principal: str, bay: str | None) -> Account:
    return Account.create(
        name=name,
        role=role,
        password_hash=password_hash,
        created_at=at,
        password_changed_at=at,
        principal=principal,
        bay=bay,
    )


def set_password(name: str, password_hash: str, *, at: datetime) -> bool:
    return (
        Account.update(password_hash=password_hash, password_changed_at=at).where(Account.name == name).execute() == 1
    )


def set_role(name: str, role: str) -> bool:
    return Account.update(role=role).where(Account.name == name).execute() == 1


def set_bay(name: str, bay: str, *, unless_set: bool) -> None:
    """A worker's bay; `unless_set` leaves the one it has."""
    where = Account.name == name
    if unless_set:
        where &= Account.bay.is_null()
    Account.update(bay=bay).where(where).execute()


def heard(name: str, principal: str, *, at: datetime) -> None:
    """A worker called (a claim, a heartbeat, a result)."""
    Account.update(last_heard_at=at).where((Account.name == name) & (Account.principal == principal)).execute()


def refused(name: str, principal: str, why: str, *, at: datetime) -> None:
    """A worker's call was refused, and why (it was heard too)."""
    Account.update(last_heard_at=at, refused_at=at, refusal=why).where(
        (Account.name == name) & (Account.principal == principal)
    ).execute()


def workers_page(*, limit: int, cursor: str | None) -> tuple[list[Account], str | None]:
    """The worker accounts by name, keyset-paged on it."""
    query = Account.select().where(Account.role == "worker")
    if cursor:
        (after,) = decode_cursor(cursor, str)
        query = query.where(Account.name > after)
    rows = list(query.order_by(Account.name).limit(limit + 1))
    return page_of(rows, limit, lambda account: [account.name])


def delete(name: str) -> bool:
    return Account.delete().where(Account.name == name).execute() == 1


def everyone() -> list[Account]:
    """Every account, by name."""
    return list(Account.select().order_by(Account.name))
