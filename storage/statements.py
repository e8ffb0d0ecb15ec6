"""The hot statements, composed once, on peewee's documented surface.

peewee composes a query's SQL every time it runs: about 0.2 ms for a one-row select, forty times what SQLite takes
to execute it. The statements every notify, event and move runs go through here instead. Each is composed once per
model, columns and kind of database into a `Statement` (its SQL, written from `Model._meta` with the database's
`param` mark, and how each value goes in and comes out), all of them kept in `_composed`, and runs with fresh
parameters through `Database.execute_sql`.

Values pass through each field's `db_value` and `python_value`, so they mean exactly what the models say. A row
comes back as a record: one plain dataclass per model (`record_type`), its fields under the names a model instance
reads them by (a foreign key by its id: `Ticket.initiative_id`), cheaper to build and to read than a model
instance. The rest of `storage/` uses peewee's query builder and model instances, where a few microseconds do not
count.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from peewee import (
    AutoField,
    BigAutoField,
    BigIntegerField,
    BooleanField,
    CharField,
    Field,
    ForeignKeyField,
    IntegerField,
    Model,
    TextField,
)

from storage.db import db, is_postgres

# A value of the type a plain field keeps as it is (by the field's exact class: a subclass may convert, as the JSON
# and time fields do), or None, goes in and comes out without its field's conversion: peewee's own adapters return
# a `str` of a text field, an `int` of an integer field and a `bool` of a boolean field unchanged, and every
# field's conversions return None as it is. A notify passes some forty values, and each conversion is two calls.
_UNCHANGED = {
    CharField: str,
    TextField: str,
    IntegerField: int,
    BigIntegerField: int,
    AutoField: int,
    BigAutoField: int,
    BooleanField: bool,
}
_NO_TYPE = type("_NoType", (), {})  # no value has this type: a field whose values are always converted

Conversion = tuple[type, Callable[[Any], Any]]  # the type a value keeps as it is, else the field's conversion


@dataclasses.dataclass(frozen=True, slots=True)
class Statement:
    """One statement composed for one kind of database."""

    sql: str
    # One per parameter, in order: how a value becomes a database value (none for a hand-written statement, whose
    # caller passes database values).
    params: tuple[Conversion, ...] = ()
    # A select: the record a row becomes, and how each column's value is read.
    record: type | None = None
    columns: tuple[Conversion, ...] = ()
    # An insert: the record's attributes for the values given, those of the fields left to their defaults, and the
    # attribute of the id the database assigns (read back by RETURNING on PostgreSQL, else from the cursor).
    names: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    auto: str | None = None
    returning: bool = False


# Every statement composed so far, by what it is and the kind of database it is for (one per model, columns and
# kind: a handful of dozens in a process). Each is derived from the models and the statement's own text only.
_composed: dict[tuple, Statement] = {}


def _prepared(key: tuple, compose: Callable[..., Statement], *args: Any) -> tuple[Any, Statement]:
    """The database the models are bound to, and the statement `key` composed for its kind (once)."""
    database = db.obj
    kind = (*key, type(database))
    statement = _composed.get(kind)
    if statement is None:
        statement = _composed[kind] = compose(database, *args)
    return database, statement


@functools.cache
def record_type(model: type[Model]) -> type:
    """The record of `model`'s rows: a dataclass of its fields in the table's order, each named as a model instance
    reads it (a foreign key by its id), compared by identity like the rows it stands for. A model whose `Meta`
    declares its `record` (a typed dataclass of those fields, in that order) is read into that one."""
    declared = getattr(model._meta, "record", None)
    if declared is not None:
        return declared
    fields = [(_attribute(field), Any) for field in model._meta.sorted_fields]
    return dataclasses.make_dataclass(f"{model.__name__}Record", fields, slots=True, eq=False)


def _attribute(field: Field) -> str:
    return field.object_id_name if isinstance(field, ForeignKeyField) else field.name


def _conversion(field: Field, convert: Callable[[Any], Any]) -> Conversion:
    plain = field.rel_field if type(field) is ForeignKeyField else field
    return _UNCHANGED.get(type(plain), _NO_TYPE), convert


def _column(model: type[Model], name: str) -> str:
    return f'"{model._meta.fields[name].column_name}"'


def _converted(conversions: tuple[Conversion, ...], values: Iterable[Any]) -> list[Any]:
    return [
        value if value is None or type(value) is kind else convert(value)
        for (kind, convert), value in zip(conversions, values, strict=True)
    ]


def _record(statement: Statement, row: tuple) -> Any:
    return statement.record(*_converted(statement.columns, row))


# -- by model ------------------------------------------------------------------------------------------------------


def _insert(database, model: type[Model], names: tuple[str, ...]) -> Statement:
    meta = model._meta
    fields = [meta.fields[name] for name in names]
    auto = meta.primary_key if isinstance(meta.primary_key, AutoField) else None  # BigAutoField is one too
    returning = is_postgres() and auto is not None
    marks = ", ".join(database.param for _ in names)
    sql = f'INSERT INTO "{meta.table_name}" ({", ".join(_column(model, n) for n in names)}) VALUES ({marks})'
    if returning:
        sql += f' RETURNING "{auto.column_name}"'
    left = [field for field in meta.sorted_fields if field.name not in names and field is not auto]
    if any(callable(field.default) for field in left):
        raise ValueError(f"{model.__name__}: a default computed per row is not supported here; give its value")
    return Statement(
        sql,
        params=tuple(_conversion(field, field.db_value) for field in fields),
        record=record_type(model),
        names=tuple(_attribute(field) for field in fields),
        defaults={_attribute(field): field.default for field in left},
        auto=_attribute(auto) if auto is not None else None,
        returning=returning,
    )


def insert(model: type[Model], values: Mapping[str, Any]) -> Any:
    """Insert one row (values by field name); return it as a record, its auto id set and the fields not given at
    their defaults."""
    database, statement = _prepared(("insert", model, *values), _insert, model, tuple(values))
    cursor = database.execute_sql(statement.sql, _converted(statement.params, values.values()))
    data = dict(zip(statement.names, values.values(), strict=True))
    if statement.auto is not None:
        data[statement.auto] = cursor.fetchone()[0] if statement.returning else cursor.lastrowid
    return statement.record(**statement.defaults, **data)


def _update(database, model: type[Model], names: tuple[str, ...], keys: tuple[str, ...]) -> Statement:
    sets = ", ".join(f"{_column(model, n)} = {database.param}" for n in names)
    conditions = " AND ".join(f"{_column(model, k)} = {database.param}" for k in keys)
    fields = model._meta.fields
    return Statement(
        f'UPDATE "{model._meta.table_name}" SET {sets} WHERE {conditions}',
        params=tuple(_conversion(fields[n], fields[n].db_value) for n in (*names, *keys)),
    )


def update(model: type[Model], values: Mapping[str, Any], where: Mapping[str, Any]) -> int:
    """`UPDATE ... SET values WHERE every where-field equals its value`; return the rows touched."""
    key = ("update", model, *values, "where", *where)
    database, statement = _prepared(key, _update, model, tuple(values), tuple(where))
    params = _converted(statement.params, (*values.values(), *where.values()))
    return database.execute_sql(statement.sql, params).rowcount


def _select(database, model: type[Model], tail: str, keys: tuple[str, ...] = ()) -> Statement:
    fields = model._meta.sorted_fields
    columns = ", ".join(f'"{field.column_name}"' for field in fields)
    return Statement(
        f'SELECT {columns} FROM "{model._meta.table_name}" {tail}',
        params=tuple(_conversion(model._meta.fields[k], model._meta.fields[k].db_value) for k in keys),
        record=record_type(model),
        columns=tuple(_conversion(field, field.python_value) for field in fields),
    )


def _select_one(database, model: type[Model], keys: tuple[str, ...], lock: bool) -> Statement:
    conditions = " AND ".join(f"{_column(model, k)} = {database.param}" for k in keys)
    return _select(database, model, f"WHERE {conditions} LIMIT 1" + (" FOR UPDATE" if lock else ""), keys)


def select_one(model: type[Model], where: Mapping[str, Any], *, for_update: bool = False) -> Any | None:
    """The record of the one row whose where-fields equal their values (by a unique key), or None; with
    `for_update`, its row is locked for the rest of the transaction (PostgreSQL: SQLite's writer holds them all)."""
    lock = for_update and is_postgres()
    database, statement = _prepared(("select", model, *where, lock), _select_one, model, tuple(where), lock)
    row = database.execute_sql(statement.sql, _converted(statement.params, where.values())).fetchone()
    return None if row is None else _record(statement, row)


def rows(model: type[Model], key: tuple, tail: Callable[[str], str], params: list[Any]) -> list[Any]:
    """The records of `model`'s rows for a hand-written `WHERE ... ORDER BY ... LIMIT ...` tail: `tail(mark)` writes
    it with `mark` where each parameter goes; `params` are database values already. `key` names the statement."""

    def compose(database) -> Statement:
        return _select(database, model, tail(database.param))

    database, statement = _prepared(("rows", model, *key), compose)
    return [_record(statement, row) for row in database.execute_sql(statement.sql, params).fetchall()]


# -- hand-written ------------------------------------------------------------------------------------------------
# `sql(mark)` writes the statement with `mark` (the database's `param`: `?` on SQLite, `%s` on PostgreSQL) where each
# parameter goes; `params` are database values already (`field.db_value`); `key` names the statement.


def _cursor(key: tuple, sql: Callable[[str], str], params: list[Any]):
    database, statement = _prepared(key, lambda database: Statement(sql(database.param)))
    return database.execute_sql(statement.sql, params)


def scalar(key: tuple, sql: Callable[[str], str], params: list[Any]) -> Any:
    """The first column of the first row of a hand-written query, or None."""
    row = _cursor(("scalar", *key), sql, params).fetchone()
    return None if row is None else row[0]


def row(key: tuple, sql: Callable[[str], str], params: list[Any]) -> tuple[Any, ...]:
    """The first row of a hand-written query, as a tuple (empty when there is none)."""
    found = _cursor(("row", *key), sql, params).fetchone()
    return tuple(found) if found is not None else ()


def all_rows(key: tuple, sql: Callable[[str], str], params: list[Any]) -> list[tuple[Any, ...]]:
    """Every row of a hand-written query, as tuples."""
    return _cursor(("all_rows", *key), sql, params).fetchall()


def execute(key: tuple, sql: Callable[[str], str], params: list[Any]) -> int:
    """Run a hand-written statement; return the rows it touched."""
    return _cursor(("execute", *key), sql, params).rowcount
