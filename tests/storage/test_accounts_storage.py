"""Accounts in the database: migration 3 brings a version-2 database up to them, and what is stored of a
password is its argon2id hash alone."""

from datetime import UTC, datetime

import pytest

from storage import db as storage_db
from storage import migrations
from storage.models import Account, Initiative, Wallet

from conftest import PASSWORDS

pytestmark = pytest.mark.both_backends


def _columns(model) -> set[str]:
    return {c.name for c in storage_db.db.get_columns(model._meta.table_name)}


def test_migration_3_brings_a_version_2_database_up_to_accounts_and_attribution(scratch):
    # On a database of its own: the shared one of the suite keeps its newest schema (a later migration changes the
    # account table, which this one makes as version 3 had it).
    storage_db.bind(storage_db.open_database(scratch.url(), max_connections=4))
    assert migrations.migrate(migrations.MIGRATIONS[:2]) == [1, 2]
    db = storage_db.db
    with storage_db.connection(), db.atomic():
        # The database as version 2 left it: no accounts, nobody named on initiatives or the wallet.
        now = datetime(2026, 11, 1, tzinfo=UTC)
        # Only the columns version 2 had (peewee inserts no column it was not given and has no default for).
        Initiative.insert(id="port", name="Port", stage="active", created_at=now, updated_at=now).execute()
    with storage_db.connection():
        assert "updated_by" not in _columns(Initiative) and not Account.table_exists()

    assert migrations.migrate()[0] == 3
    with storage_db.connection():
        assert "updated_by" in _columns(Initiative) and "updated_by" in _columns(Wallet)
        assert Account.table_exists() and Account.select().count() == 0
        old = Initiative.get_by_id("port")
        assert (old.name, old.updated_by) == ("Port", None)  # what was there stays, with nobody named
    assert migrations.migrate() == []
    assert migrations.current_version() >= 3


def test_an_account_stores_an_argon2id_hash_and_never_the_password(app):
    from domain import accounts

    accounts.add("alice", "operator", "alice-password-1", passwords=PASSWORDS)
    with storage_db.connection():
        stored = Account.get_by_id("alice")
        row = " ".join(str(v) for v in Account.select().where(Account.name == "alice").tuples().get())
    assert stored.password_hash.startswith("$argon2id$")
    assert "alice-password-1" not in row
    assert accounts.check("alice", "alice-password-1", passwords=PASSWORDS).role == "operator"
    assert accounts.check("alice", "alice-password-2", passwords=PASSWORDS) is None
    assert accounts.check("nobody", "alice-password-1", passwords=PASSWORDS) is None


def test_emptying_the_board_for_the_demo_keeps_peoples_accounts(app):
    from domain import accounts
    from storage import reset, wallet

    accounts.add("alice", "operator", "alice-password-1", passwords=PASSWORDS)
    with storage_db.connection(), storage_db.transaction():
        wallet.put(budget=10.0, spent=1.0, locked=True, at=datetime(2026, 11, 1, tzinfo=UTC), by="alice")
    with storage_db.connection():
        reset.empty()
        assert [a.name for a in Account.select()] == ["alice"]
        assert (wallet.get().budget, wallet.get().updated_by) == (0.0, None)
