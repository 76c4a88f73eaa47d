"""Fixed SQL for the hot paths, on either backend: '?' placeholders, prepared once per connection on
PostgreSQL (PreparedStatements), run on the database bound to the running unit of work (db.Store binds
it). Split out of db.py; units reach these as `db.sql_rows` and so on, as before.
"""
from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, TypeAlias, TypeVar, cast

import msgspec
import peewee as pw

from .database import PostgresDatabase, is_sqlite
from .models import database_proxy

M = TypeVar("M", bound=pw.Model)
Row: TypeAlias = tuple[Any, ...]  # a row as the driver hands it back, columns in the statement's order


def current_database() -> pw.Database:
    """The database bound to this thread (inside a unit of work)."""
    return database_proxy.obj


def tuples(query: pw.SelectBase) -> Iterable[Row]:
    """`query.tuples()`: its rows as tuples. (Peewee's stubs keep the model as the row type of
    `.tuples()`, so the type is said here, once.)"""
    return cast(Iterable[Row], query.tuples())


def locked(query: pw.ModelSelect[M]) -> pw.ModelSelect[M]:
    """`query` locking the rows it reads until the unit commits, for read-modify-write units. On
    PostgreSQL several writer threads (and processes) run units at once, and without the lock two of
    them could read the same row and the later write would undo the earlier. SQLite's single writer
    already runs units one at a time."""
    return query if is_sqlite(current_database()) else query.for_update()


def for_update() -> str:
    """`locked` for fixed SQL: " FOR UPDATE" to end a SELECT with on PostgreSQL, nothing on SQLite."""
    return "" if is_sqlite(current_database()) else " FOR UPDATE"


@lru_cache(maxsize=128)
def _placeholders(sql: str, param: str) -> str:
    return sql if param == "?" else sql.replace("?", param)


def sql_execute(sql: str, params: Sequence[Any] = ()) -> Any:
    """Runs fixed SQL written with '?' placeholders on either backend; returns the cursor.
    For hot paths where building the query with Peewee costs more than running it. On PostgreSQL the
    statement is prepared once per connection (see PreparedStatements)."""
    database = current_database()
    if is_sqlite(database):
        return database.execute_sql(sql, params)
    # Every database that is not SQLite is a PostgresDatabase (database.open_database).
    return cast(PostgresDatabase, database).prepared.execute(database, sql, params)


class PreparedStatements:
    """Fixed SQL on PostgreSQL as server-side prepared statements, one set per connection.

    psycopg2 sends every statement as text, so PostgreSQL parses, analyses and plans the send's CTE on
    every call: about a third of the database's CPU per send (pg_stat_statements, bench/RESULTS.md).
    `PREPARE` once per connection and `EXECUTE` after; prepared statements belong to the session, not
    to a transaction, so a unit that rolls back keeps them. A pooler in transaction mode would hand the
    session to other clients between transactions: `COORD_PG_PREPARE=off` (docs/deploy.md)."""

    LIMIT = 256  # distinct statements per connection (IN-lists of many lengths make more)

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._local = threading.local()

    def execute(self, database: pw.Database, sql: str, params: Sequence[Any]) -> Any:
        if not self.enabled:
            return database.execute_sql(_placeholders(sql, database.param), params)
        names = self._names(database.connection())
        name = names.get(sql)
        if name is None:
            name = self._prepare(database, names, sql)
        return database.execute_sql(_execute_sql(name, len(params)), params)

    def _names(self, connection: object) -> dict[str, str]:
        held: tuple[object, dict[str, str]] | None = getattr(self._local, "held", None)
        if held is None or held[0] is not connection:  # a new connection (reconnected) starts empty
            held = self._local.held = (connection, {})
        return held[1]

    def _prepare(self, database: pw.Database, names: dict[str, str], sql: str) -> str:
        if len(names) >= self.LIMIT:
            oldest_sql = next(iter(names))
            database.execute_sql(f"DEALLOCATE {names.pop(oldest_sql)}")
        name = f"coord_{next(_statement_numbers)}"
        database.execute_sql(f"PREPARE {name} AS {_numbered(sql)}")
        names[sql] = name
        return name


_statement_numbers = itertools.count(1)


@lru_cache(maxsize=512)
def _numbered(sql: str) -> str:
    """'?' placeholders as $1, $2, ... (fixed SQL never has a '?' inside a literal)."""
    parts = sql.split("?")
    return "".join(part + (f"${i}" if i < len(parts) else "") for i, part in enumerate(parts, 1))


@lru_cache(maxsize=64)
def _execute_sql(name: str, count: int) -> str:
    return f"EXECUTE {name}" + (f"({', '.join(['%s'] * count)})" if count else "")


def sql_rows(sql: str, params: Sequence[Any] = ()) -> list[Row]:
    return sql_execute(sql, params).fetchall()


@lru_cache(maxsize=32)
def every_column(model: type[pw.Model]) -> str:
    """`model`'s columns, quoted, in the order `model_from_row` reads them."""
    return ", ".join(f'"{field.column_name}"' for field in model._meta.sorted_fields)


def model_from_row(model: type[M], row: Row) -> M:
    """An instance of `model` from a row of `every_column(model)`, built as Peewee builds a SELECT's rows (each
    column through its field's python_value, nothing dirty)."""
    fields = model._meta.sorted_fields
    instance = model(__no_default__=1, **{field.name: field.python_value(value) for field, value in zip(fields, row)})
    cast(Any, instance)._dirty.clear()  # (Peewee's stubs do not declare _dirty)
    return instance


def sql_models(model: type[M], rest: str, params: Sequence[Any] = ()) -> list[M]:
    """Rows of `model` (every column) chosen by fixed SQL `rest` (what follows `FROM <table>`: WHERE, ORDER BY).
    For hot paths: Peewee composing a SELECT of every column costs more than running it."""
    return [model_from_row(model, row) for row in sql_rows(_select_every_column(model) + rest, params)]


@lru_cache(maxsize=32)
def _select_every_column(model: type[pw.Model]) -> str:
    return f'SELECT {every_column(model)} FROM "{model._meta.table_name}" '


def sql_insert(sql: str, params: Sequence[Any] = ()) -> int | None:
    """Runs one fixed INSERT of one row (without RETURNING) and returns the new row's id, or None when a
    guarded INSERT ... SELECT ... WHERE inserted nothing. SQLite: lastrowid, so the insert is one step
    of the statement instead of two: each step releases and retakes the GIL (measured:
    bench/RESULTS.md, "Figures from code comments")."""
    database = current_database()
    if is_sqlite(database):
        cursor = database.execute_sql(sql, params)
        return cursor.lastrowid if cursor.rowcount else None
    row = database.execute_sql(_placeholders(sql + " RETURNING id", database.param), params).fetchone()
    return row[0] if row else None


def in_list(count: int) -> str:
    """`(?, ?, ...)`: `count` placeholders for an IN list of fixed SQL."""
    return "(" + ", ".join(["?"] * count) + ")"


# Merged statements (db.merges, PostgreSQL): many calls' rows in one INSERT ... SELECT from a VALUES list, each
# row taking its ids from the tables' sequences first, so later INSERTs of the statement can refer to them.

def serial_sequences(**tables: str) -> str:
    """The CTE `s`, naming each table's id sequence by its keyword (e.g. m="message": `nextval(s.m)`)."""
    names = ", ".join(f"pg_get_serial_sequence('{table}', 'id')::regclass AS {name}" for name, table in tables.items())
    return f"s AS (SELECT {names})"


def json_rows(columns: tuple[tuple[str, str], ...]) -> str:
    """The relation x(column, ...) of rows passed as ONE parameter, the JSON text `json_rows_param` makes, each
    value read as its (column, type)'s type. A VALUES list of placeholders had one parameter per value, and
    psycopg2 quotes each in the writer thread while holding the GIL (13 % of a loaded server's samples for
    merged ingests, py-spy); PostgreSQL also prepared one statement per batch size."""
    return f"json_to_recordset(?::json) AS x({', '.join(f'{name} {kind}' for name, kind in columns)})"


def json_rows_param(columns: tuple[tuple[str, str], ...], rows: Iterable[Sequence[Any]]) -> str:
    """`rows` (values in `columns`' order; datetimes naive UTC, as db.to_db makes them) as the parameter of
    `json_rows(columns)`. msgspec encodes a batch of 20 sends in 35 us, the json module in 100 us, and
    psycopg2 quoted their values in 270 us."""
    names = [name for name, _kind in columns]
    return _ROWS_ENCODER.encode([dict(zip(names, row)) for row in rows]).decode()


_ROWS_ENCODER = msgspec.json.Encoder()


# Merged statements on SQLite (db.merges with on_sqlite): the writer holds the write lock (BEGIN IMMEDIATE), so a
# batch takes its rows' ids from the tables' highest, as SQLite itself would (a rowid table without AUTOINCREMENT
# gives max + 1), and each table gets one INSERT for the batch: every statement's steps release and retake the
# GIL, and Python pays for each statement it runs.

def highest_ids(*tables: str) -> list[int]:
    """SQLite: the highest id in each of `tables` (0 for an empty one)."""
    return list(sql_rows("SELECT " + ", ".join(f"(SELECT coalesce(max(id), 0) FROM {table})" for table in tables))[0])


_MAX_PARAMETERS = 32_000  # SQLite's limit is 32,766 a statement


def insert_rows(table: str, columns: tuple[str, ...], rows: Sequence[Sequence[Any]]) -> None:
    """`rows` into `table`, in one INSERT (or as few as SQLite's parameter limit allows)."""
    per_statement = max(1, _MAX_PARAMETERS // len(columns))
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
    placeholders = "(" + ", ".join(["?"] * len(columns)) + ")"
    for start in range(0, len(rows), per_statement):
        chunk = rows[start:start + per_statement]
        sql_execute(head + ", ".join([placeholders] * len(chunk)), [value for row in chunk for value in row])
