"""PostgreSQL's fixed SQL as server-side prepared statements (db.PreparedStatements): prepared once per
connection, kept when a unit rolls back, prepared again on a new connection, bounded per connection,
and off with COORD_PG_PREPARE=off."""
from __future__ import annotations

import pytest

from coordserver import db
from coordserver.db import PreparedStatements, Store
from coordserver.errors import Conflict
from coordserver.timeutil import FrozenClock

COUNT = "SELECT count(*) FROM event WHERE id > ?"


def prepared_here() -> list[str]:
    """This connection's prepared statements, as PostgreSQL lists them."""
    rows = db.current_database().execute_sql("SELECT statement FROM pg_prepared_statements").fetchall()
    return sorted(statement for (statement,) in rows)


def rolled_back_then_again() -> list[str]:
    """The statement's first run (its PREPARE) in a savepoint that rolls back, then a second run."""
    try:
        with db.current_database().atomic():
            db.sql_rows(COUNT, (0,))
            raise Conflict("refused after the statement ran")
    except Conflict:
        pass
    assert db.sql_rows(COUNT, (1,)) == [(0,)]  # EXECUTE would fail here had the PREPARE been rolled back
    return prepared_here()


@pytest.fixture
def pg_store(pg_cluster):
    store = Store(pg_cluster.create_database(), FrozenClock(), readers=1)
    store.open()
    yield store
    store.close()


async def test_a_statement_is_prepared_once_per_connection_and_outlives_a_rollback(pg_store):
    statements = await pg_store.write(rolled_back_then_again)
    assert [s.split(" AS ", 1)[1] for s in statements] == ["SELECT count(*) FROM event WHERE id > $1"]
    for after in (0, 1, 2):
        assert await pg_store.read(db.sql_rows, COUNT, (after,)) == [(0,)]
    assert len(await pg_store.read(prepared_here)) == 1  # the reader's connection: prepared once


async def test_a_new_connection_prepares_again(pg_store):
    assert await pg_store.read(db.sql_rows, COUNT, (0,)) == [(0,)]

    def reconnect() -> None:
        db.current_database().close()
        db.current_database().connect()
    await pg_store.read(reconnect)
    assert await pg_store.read(prepared_here) == []
    assert await pg_store.read(db.sql_rows, COUNT, (0,)) == [(0,)]
    assert len(await pg_store.read(prepared_here)) == 1


async def test_each_connection_keeps_at_most_the_limit(pg_store, monkeypatch):
    monkeypatch.setattr(PreparedStatements, "LIMIT", 3)
    for width in range(1, 6):  # five IN-lists of different lengths: five distinct statements
        sql = "SELECT count(*) FROM event WHERE id IN (" + ", ".join("?" * width) + ")"
        assert await pg_store.read(db.sql_rows, sql, tuple(range(width))) == [(0,)]
    kept = await pg_store.read(prepared_here)
    assert len(kept) == 3 and all("IN ($1, $2, $3" in statement for statement in kept), kept


async def test_off_prepares_nothing(pg_cluster):
    store = Store(pg_cluster.create_database(), FrozenClock(), readers=1, prepare=False)
    store.open()
    try:
        assert await store.read(db.sql_rows, COUNT, (0,)) == [(0,)]
        assert await store.read(prepared_here) == []
    finally:
        store.close()
