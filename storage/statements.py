"""The hot statements, composed once.

peewee composes a query's SQL text every time it runs: about 0.2 ms for a one-row select, forty times what
SQLite takes to execute it. The statements every notify, event and move runs go through here instead: the
SQL for a model and a set of columns is composed once per database and then executed with fresh
parameters. Values still pass through each field's `db_value`/`python_value`, so they mean exactly what the
models say; the rest of `storage/` keeps using peewee's query builder, where a few microseconds do not count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from peewee import (
    AutoField,
    BigAutoField,
    BigIntegerField,
    BooleanField,
    CharField,
    ForeignKeyField,
    IntegerField,
    Model,
    PostgresqlDatabase,
    SqliteDatabase,
    TextField,
    __exception_wrapper__,
)

from storage.db import db

M = TypeVar("M", bound=Model)

_sql: dict[tuple, str] = {}
_converters: dict[tuple, tuple] = {}


def _execute(database, sql: str, params: list[Any]):
    """Run one statement: on SQLite straight on the thread's connection (peewee's `execute_sql` adds a debug-log
    check, query hooks and a cursor of its own around the same call), with peewee's exceptions either way."""
    if isinstance(database, SqliteDatabase):
        with __exception_wrapper__:
            return database.connection().execute(sql, params)
    return database.execute_sql(sql, params)


def _is_postgres() -> bool:
    return isinstance(db.obj, PostgresqlDatabase)


def _compose(key: tuple, build) -> str:
    database = db.obj
    key = (*key, type(database), database.param)
    sql = _sql.get(key)
    if sql is None:
        sql = _sql[key] = build(database.param)
    return sql


def _column(model: type[Model], name: str) -> str:
    return f'"{model._meta.fields[name].column_name}"'


# The value a plain field's `db_value` (and `python_value`) hands back unchanged, by the field's exact class (a
# subclass may convert, as the JSON fields do): peewee's own adapters return a `str` of a text field, an `int` of
# an integer field and a `bool` of a boolean field as they are, and every field's conversions return None as it
# is. Such values skip the two calls (`db_value`, `adapt`) a value otherwise costs; every other value goes through
# its field's conversion (a boolean read from SQLite is an int, and is converted).
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


def _unchanged(field) -> type:
    if type(field) is ForeignKeyField:
        field = field.rel_field
    return _UNCHANGED.get(type(field), _NO_TYPE)


def _conversion(fields) -> tuple[tuple, tuple]:
    """For these fields, in order: the type each passes unchanged, and each one's `db_value`."""
    return tuple(_unchanged(f) for f in fields), tuple(f.db_value for f in fields)


def _values(kinds: tuple, converters: tuple, given) -> list[Any]:
    return [
        value if value is None or type(value) is kind else convert(value)
        for kind, convert, value in zip(kinds, converters, given, strict=True)
    ]


def _convert(model: type[Model], values: Mapping[str, Any]) -> list[Any]:
    """The values as the database takes them, through each field's `db_value` (looked up once per field set)."""
    key = (model, *values)
    conversion = _converters.get(key)
    if conversion is None:
        fields = model._meta.fields
        conversion = _converters[key] = _conversion([fields[name] for name in values])
    return _values(*conversion, values.values())


# An insert's or update's plan, by model, column names and kind of database: its SQL and each value's conversion,
# worked out once. (A notify runs four of them: key, SQL and converters looked up in one step.)
_plans: dict[tuple, tuple] = {}


def _insert_plan(model: type[Model], names: tuple[str, ...], database) -> tuple:
    auto = model._meta.primary_key if model._meta.auto_increment else None
    returning = isinstance(database, PostgresqlDatabase) and auto is not None
    columns = ", ".join(_column(model, n) for n in names)
    marks = ", ".join(database.param for _ in names)
    sql = f'INSERT INTO "{model._meta.table_name}" ({columns}) VALUES ({marks})'
    if returning:
        sql += f' RETURNING "{auto.column_name}"'
    kinds, converters = _conversion([model._meta.fields[name] for name in names])
    return sql, kinds, converters, auto.name if auto is not None else None, returning


def insert(model: type[M], values: Mapping[str, Any]) -> M:
    """Insert one row (values by field name); return it as a model instance, with its auto id set."""
    database = db.obj
    key = ("insert", model, tuple(values), type(database))
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _insert_plan(model, key[2], database)
    sql, kinds, converters, auto, returning = plan
    cursor = _execute(database, sql, _values(kinds, converters, values.values()))
    # The instance as `model(**values)` would build it (defaults for the rest), without a setattr per field.
    data = model._meta.get_default_dict()
    data.update(values)
    if auto is not None:
        data[auto] = cursor.fetchone()[0] if returning else cursor.lastrowid
    return _with_data(model, data)


def _update_plan(model: type[Model], names: tuple[str, ...], keys: tuple[str, ...], database) -> tuple:
    param = database.param
    sets = ", ".join(f"{_column(model, n)} = {param}" for n in names)
    conditions = " AND ".join(f"{_column(model, k)} = {param}" for k in keys)
    fields = model._meta.fields
    return f'UPDATE "{model._meta.table_name}" SET {sets} WHERE {conditions}', *_conversion(
        [fields[n] for n in (*names, *keys)]
    )


def update(model: type[Model], values: Mapping[str, Any], where: Mapping[str, Any]) -> int:
    """`UPDATE ... SET values WHERE every where-field equals its value`; return the rows touched."""
    database = db.obj
    key = ("update", model, tuple(values), tuple(where), type(database))
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _update_plan(model, key[2], key[3], database)
    sql, kinds, converters = plan
    given = (*values.values(), *where.values())
    return _execute(database, sql, _values(kinds, converters, given)).rowcount


def select_one(model: type[M], where: Mapping[str, Any], *, for_update: bool = False) -> M | None:
    """The one row whose where-fields equal their values (by a unique key), or None."""
    keys = tuple(where)
    lock = for_update and _is_postgres()

    def build(param: str) -> str:
        columns = ", ".join(f'"{f.column_name}"' for f in model._meta.sorted_fields)
        conditions = " AND ".join(f"{_column(model, k)} = {param}" for k in keys)
        sql = f'SELECT {columns} FROM "{model._meta.table_name}" WHERE {conditions} LIMIT 1'
        return sql + " FOR UPDATE" if lock else sql

    row = _execute(db.obj, _compose(("select", model, keys, lock), build), _convert(model, where)).fetchone()
    return None if row is None else _instance(model, row)


def rows(model: type[M], key: tuple, tail: str, params: list[Any]) -> list[M]:
    """Rows of `model` for a hand-written `WHERE ... ORDER BY ... LIMIT ...` tail (`?` marks the parameters,
    which must already be database values); `key` names the statement for the cache."""

    def build(param: str) -> str:
        columns = ", ".join(f'"{f.column_name}"' for f in model._meta.sorted_fields)
        return f'SELECT {columns} FROM "{model._meta.table_name}" {tail.replace("?", param)}'

    cursor = db.obj.execute_sql(_compose(("rows", model, *key), build), params)
    return [_instance(model, row) for row in cursor.fetchall()]


def scalar(key: tuple, sql: str, params: list[Any]) -> Any:
    """The first column of the first row of a hand-written query (`?` marks the parameters), or None.

    `key` names the statement for the cache; `params` must already be database values (`field.db_value`).
    """
    row = db.obj.execute_sql(_compose(("scalar", *key), lambda param: sql.replace("?", param)), params).fetchone()
    return None if row is None else row[0]


def row(key: tuple, sql: str, params: list[Any]) -> tuple[Any, ...]:
    """The first row of a hand-written query (`?` marks the parameters), as a tuple (empty when there is none)."""
    found = db.execute_sql(_compose(("row", *key), lambda param: sql.replace("?", param)), params).fetchone()
    return tuple(found) if found is not None else ()


def execute(key: tuple, sql: str, params: list[Any]) -> int:
    """Run a hand-written statement (`?` marks the parameters); return the rows it touched."""
    return db.obj.execute_sql(_compose(("execute", *key), lambda param: sql.replace("?", param)), params).rowcount


# A model's columns as read: each field's name, the type its `python_value` hands back unchanged, and its
# `python_value` (plain fields read back what they were written as: see `_UNCHANGED`).
_readers: dict[type, tuple] = {}


def _instance(model: type[M], row: tuple) -> M:
    readers = _readers.get(model)
    if readers is None:
        fields = model._meta.sorted_fields
        readers = _readers[model] = tuple((f.name, _unchanged(f), f.python_value) for f in fields)
    data = {
        name: value if value is None or type(value) is kind else convert(value)
        for (name, kind, convert), value in zip(readers, row, strict=True)
    }
    return _with_data(model, data)


def instance(model: type[M], data: dict[str, Any]) -> M:
    """A model instance holding `data` (by field name, every field, database values already converted)."""
    return _with_data(model, data)


def _with_data(model: type[M], data: dict[str, Any]) -> M:
    """A model instance holding `data` (by field name), as peewee itself builds one from a row."""
    instance = model(__no_default__=True)
    instance.__data__ = data
    return instance


def all_rows(key: tuple, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """Every row of a hand-written query (`?` marks the parameters, already database values), as tuples."""
    return db.obj.execute_sql(_compose(("all_rows", *key), lambda param: sql.replace("?", param)), params).fetchall()
