"""The composed statements (`storage/statements.py`): each is kept under what cannot be another's, so a caller's key
never makes one call site run another's SQL."""

import dataclasses

import pytest
from peewee import CharField, Model, TextField

from storage import statements
from storage.models import Initiative

pytestmark = pytest.mark.both_backends


def one(key: tuple) -> int:
    return statements.scalar(key, lambda p: "SELECT 1", [])


def two(key: tuple) -> int:
    return statements.scalar(key, lambda p: "SELECT 2", [])


def test_two_call_sites_that_pick_the_same_key_each_run_their_own_statement(app, db_session):
    assert (one(("same",)), two(("same",)), one(("same",))) == (1, 2, 1)
    assert (one(()), two(())) == (1, 2)


def test_one_call_site_tells_apart_what_it_writes_differently_by_its_key(app, db_session):
    def count_of(values: list[int]) -> int:
        def sql(p: str) -> str:
            marks = ", ".join(p for _ in values)
            return f"SELECT COUNT(*) FROM (SELECT 1 AS x WHERE 1 IN ({marks})) AS found"  # noqa: S608 (marks only)

        return statements.scalar(("in", len(values)), sql, values)

    assert (count_of([1]), count_of([2, 1]), count_of([3, 4, 5])) == (1, 1, 0)


def test_rows_of_two_call_sites_under_one_key_are_their_own(app, api, db_session):
    for name in ("Alpha", "Beta"):
        assert api.post("/api/v1/initiatives", json={"id": name.lower(), "name": name}).status_code == 201

    def named(name: str) -> list[str]:
        return [r.id for r in statements.rows(Initiative, ("by",), lambda p: 'WHERE "name" = ' + p, [name])]

    def not_named(name: str) -> list[str]:
        return [r.id for r in statements.rows(Initiative, ("by",), lambda p: 'WHERE "name" <> ' + p, [name])]

    assert (named("Alpha"), not_named("Alpha"), named("Beta")) == (["alpha"], ["beta"], ["beta"])


def test_a_declared_record_is_what_the_rows_of_its_model_come_back_as(app, db_session):
    from datetime import UTC, datetime

    from storage import policy_versions
    from storage.db import transaction

    with transaction():
        added = policy_versions.add(
            version="v1",
            document={"rules": []},
            set_by="olga",
            set_at=datetime.now(UTC),
            reason="r",
            forced=None,
            replaces=10**9,
            live_since={},
        )
    read = policy_versions.get(added.id)
    assert type(added) is type(read) is policy_versions.PolicyVersionRecord
    assert (read.version, read.document, read.replaces) == ("v1", {"rules": []}, 10**9)
    newest, after = policy_versions.page(limit=1)
    older, _ = policy_versions.page(limit=1, cursor=after)
    assert [type(row) for row in newest + older] == [policy_versions.PolicyVersionRecord] * 2
    assert newest[0].id == added.id and older[0].id < added.id  # the first policy, seeded as the app started


class Note(Model):
    """A model of this test's own: nothing reads its rows."""

    title = CharField()
    body = TextField(null=True)


def test_a_record_is_declared_with_its_models_fields_in_their_order_before_its_rows_are_read():
    @dataclasses.dataclass(slots=True, eq=False)
    class Swapped:
        id: int
        body: str | None
        title: str

    with pytest.raises(TypeError, match=r"must declare Note's fields in this order: \['id', 'title', 'body'\]"):
        statements.record_of(Note)(Swapped)

    @dataclasses.dataclass
    class Compared:
        id: int
        title: str
        body: str | None

    with pytest.raises(TypeError, match="slots=True, eq=False"):
        statements.record_of(Note)(Compared)

    made = statements.record_type(Note)  # as a first read of its rows would make it

    @dataclasses.dataclass(slots=True, eq=False)
    class Late:
        id: int
        title: str
        body: str | None

    with pytest.raises(RuntimeError, match="Note's rows were read before Late was declared"):
        statements.record_of(Note)(Late)
    assert statements.record_type(Note) is made
