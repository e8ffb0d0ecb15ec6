"""Account rows, under `domain/accounts.py`: people's logins, each with a role and the hash of its password."""

from __future__ import annotations

from datetime import datetime

from storage import statements
from storage.models import Account


def get(name: str) -> Account | None:
    """The account called `name` (one indexed read: the API re-checks remembered credentials with it)."""
    return statements.select_one(Account, {"name": name})


def exists(name: str) -> bool:
    return Account.select(Account.name).where(Account.name == name).exists()


def insert(*, name: str, role: str, password_hash: str, at: datetime) -> Account:
    return Account.create(name=name, role=role, password_hash=password_hash, created_at=at, password_changed_at=at)


def set_password(name: str, password_hash: str, *, at: datetime) -> bool:
    return (
        Account.update(password_hash=password_hash, password_changed_at=at).where(Account.name == name).execute() == 1
    )


def set_role(name: str, role: str) -> bool:
    return Account.update(role=role).where(Account.name == name).execute() == 1


def delete(name: str) -> bool:
    return Account.delete().where(Account.name == name).execute() == 1


def everyone() -> list[Account]:
    """Every account, by name."""
    return list(Account.select().order_by(Account.name))
