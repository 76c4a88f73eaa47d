"""Connecting: a Peewee database from a URL, and the PostgreSQL flavour that saves round trips."""
from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import peewee as pw
from playhouse.db_url import parse as parse_url


def sqlite_path(url: str) -> Path:
    """The file of a `sqlite:///` URL (ValueError for `:memory:`, which is one database per connection)."""
    path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else urlparse(url).path
    if not path or path == ":memory:":
        raise ValueError("an in-memory SQLite database is one per connection: use a file")
    return Path(path).expanduser()


def open_database(url: str) -> pw.Database:
    """`sqlite:///relative.db`, `sqlite:////absolute.db` or `postgresql://user:pw@host:port/name`."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = sqlite_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        return pw.SqliteDatabase(
            str(path),
            pragmas={"journal_mode": "wal", "synchronous": "normal", "busy_timeout": 5000,
                     "foreign_keys": 1, "cache_size": -16000},
            check_same_thread=False,
        )
    if parsed.scheme in ("postgres", "postgresql"):
        params = parse_url(url)
        return PostgresDatabase(params.pop("database"), **params)
    raise ValueError(f"unsupported database URL scheme {parsed.scheme!r}: use sqlite:/// or postgresql://")


class StatementRunner(Protocol):
    """How a PostgresDatabase runs fixed SQL (sql.PreparedStatements, which db.Store gives it)."""

    def execute(self, database: pw.Database, sql: str, params: Sequence[Any]) -> Any: ...


class PostgresDatabase(pw.PostgresqlDatabase):
    """PostgreSQL with fewer round trips: BEGIN and the unit savepoints travel with the next statement.

    psycopg2 sends each execute as one simple-query message, which may hold several statements; so
    `defer`red statements (BEGIN, SAVEPOINT, RELEASE SAVEPOINT) are sent in front of the next real one
    instead of each costing a round trip of its own. A transaction (or unit) that never executes a
    statement never sends them at all. A send unit went from 7 round trips (BEGIN, SAVEPOINT, three
    INSERTs, RELEASE, COMMIT) to 3 (bench/RESULTS.md)."""

    prepared: StatementRunner  # set by db.Store (sql.PreparedStatements)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deferred = threading.local()

    def _pending(self) -> list[str]:
        pending: list[str] | None = getattr(self._deferred, "sql", None)
        if pending is None:
            pending = self._deferred.sql = []
        return pending

    def defer(self, sql: str) -> None:
        self._pending().append(sql)

    def undefer(self, sql: str) -> bool:
        """Withdraw `sql` if it is the last statement still waiting to be sent; True if it was."""
        pending = self._pending()
        if pending and pending[-1] == sql:
            pending.pop()
            return True
        return False

    def execute_sql(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        pending = self._pending()
        if pending:
            # The deferred statements carry no parameters and no '%', so psycopg2's interpolation of
            # `params` into `sql` is unaffected by the prefix.
            sql = "; ".join(pending) + "; " + sql
            pending.clear()
        return super().execute_sql(sql, params)

    def begin(self, isolation_level: str | None = None) -> None:
        # _isolation_level: peewee's own (set from the isolation_level connect parameter), left out of its stubs
        if isolation_level is not None or self._isolation_level:  # type: ignore[attr-defined]
            super().begin(isolation_level)
        else:
            if self.is_closed():  # connect now: connecting later would reset peewee's transaction stack
                self.connect()
            self.defer("BEGIN")

    def _end(self) -> bool:
        """Drop what is still deferred; False if the transaction never began on the server."""
        pending = self._pending()
        began = "BEGIN" not in pending
        pending.clear()
        return began

    def commit(self) -> None:
        if self._end():  # a deferred RELEASE SAVEPOINT is moot: COMMIT ends the savepoints too
            super().commit()

    def rollback(self) -> None:
        if self._end():
            super().rollback()

    def close(self) -> bool:
        self._pending().clear()
        return super().close()


def is_sqlite(database: pw.Database) -> bool:
    return isinstance(database, pw.SqliteDatabase)


def connection_state(database: pw.Database) -> pw._ConnectionState:
    """Peewee's per-thread connection state (its `conn` is None while this thread has no connection;
    `connection()` would open one). Private to peewee, so its stubs leave the attribute out."""
    return database._state  # type: ignore[attr-defined]
