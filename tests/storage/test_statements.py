"""The composed statements (`storage/statements.py`): each is kept under what cannot be another's, so a caller's key
never makes one call site run another's SQL."""

import pytest

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
