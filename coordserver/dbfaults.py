"""Failures of the database itself, told apart from bugs where errors leave the Store (db.py).

`classify` names a database that cannot be reached or used (Unavailable: 503, Retry-After) or whose
storage is full (StorageFull: 507), from the driver's exception class and code, wherever in the
exception's chain it sits (peewee wraps the driver's error; SQLite's "cannot rollback - no transaction
is active" carries the "database or disk is full" that caused it). Anything else is None: a bug or the
request's own error, rendered as before.

`Outage` turns a run of such failures into two log lines, one when it starts and one when the database
answers again, with how long it lasted and how many requests were refused meanwhile; not a traceback per
request. Its `generation` tells the store's threads to drop connections opened before an outage began.
"""
from __future__ import annotations

import logging
import sqlite3
import threading
import time
from typing import Any, Callable, Iterator

from .errors import ApiError, DatabaseFault, StorageFull, Unavailable

log = logging.getLogger("coord.db")

# PostgreSQL SQLSTATEs of a server that cannot serve now; class 08 (connection exception) is all of it.
_PG_UNAVAILABLE = frozenset({
    "57P01",  # admin_shutdown: stopped (fast) or a backend terminated (pg_terminate_backend)
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now: starting up or shutting down
    "57P05",  # idle_session_timeout
    "53000",  # insufficient_resources
    "53200",  # out_of_memory
    "53300",  # too_many_connections
    "25006",  # read_only_sql_transaction: a standby after a failover
    "58030",  # io_error
})
_PG_FULL = "53100"  # disk_full
# SQLite primary result codes (sqlite3.Error.sqlite_errorcode & 0xff).
_SQLITE_FULL = 13
_SQLITE_BUSY = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED: another connection holds the lock
_SQLITE_UNAVAILABLE = frozenset({7, 8, 10, 14})  # NOMEM, READONLY, IOERR, CANTOPEN

FULL, BUSY, DOWN = "full", "busy", "down"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, the driver error peewee wrapped (its first argument) and the errors it was raised from."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        error = todo.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        yield error
        todo += [error.__cause__, error.__context__]
        if error.args and isinstance(error.args[0], BaseException):
            todo.append(error.args[0])


def _psycopg_kind(error: BaseException) -> str | None:
    try:
        import psycopg2
    except ImportError:  # pragma: no cover - SQLite-only installs
        return None
    if not isinstance(error, psycopg2.Error):
        return None
    code = error.pgcode
    if code == _PG_FULL:
        return FULL
    if code is None:  # no SQLSTATE: the connection itself (refused, lost, closed, cut off at connect)
        return DOWN if isinstance(error, (psycopg2.OperationalError, psycopg2.InterfaceError)) else None
    return DOWN if code.startswith("08") or code in _PG_UNAVAILABLE else None


def _sqlite_kind(error: BaseException) -> str | None:
    if not isinstance(error, sqlite3.Error):
        return None
    code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF
    if code == _SQLITE_FULL:
        return FULL
    if code in _SQLITE_BUSY:
        return BUSY
    return DOWN if code in _SQLITE_UNAVAILABLE else None


def fault_kind(exc: BaseException) -> str | None:
    """FULL, BUSY or DOWN when `exc` (or what it was raised from) is the database failing, else None.
    Storage full wins: the errors it causes on the way (a failed rollback) are its consequence."""
    kinds = set()
    for error in _chain(exc):
        kind = _psycopg_kind(error) or _sqlite_kind(error)
        if kind:
            kinds.add(kind)
    for kind in (FULL, DOWN, BUSY):
        if kind in kinds:
            return kind
    return None


def fault_for(kind: str | None) -> DatabaseFault | None:
    """The answer for a fault of this kind (a new error for each caller), None for no fault."""
    if kind == FULL:
        return StorageFull()
    if kind == BUSY:
        return Unavailable("Database busy; retry shortly")
    return Unavailable() if kind == DOWN else None


def classify(exc: BaseException) -> DatabaseFault | None:
    """The answer for a database failure, or None for any other error."""
    return exc if isinstance(exc, DatabaseFault) else fault_for(fault_kind(exc))


def reason(exc: BaseException) -> str:
    """A one-line description of the driver's error that was classified, for the outage's log line."""
    errors = list(_chain(exc))
    found = next((e for e in errors if _psycopg_kind(e) or _sqlite_kind(e)), errors[0])
    text = " ".join(str(found).split())
    return f"{type(found).__module__.split('.')[0]}.{type(found).__name__}: {text[:200]}"


_WRITE_ONLY = frozenset({FULL, BUSY})  # reads go on meanwhile: only a write that succeeds ends these
_WHAT = {DOWN: "database unavailable", FULL: "database storage full", BUSY: "database locked elsewhere"}
_AGAIN = {DOWN: "database available again", FULL: "database writes succeed again",
          BUSY: "database writes succeed again"}


class Outage:
    """The state of one store's database as its units find it: answering, or failing since when and why.

    `refuse` and `succeeded` are called from the store's threads after every unit that failed or
    succeeded (`succeeded` costs one attribute read while nothing is wrong); `count_refusal` from the
    event loop for each request answered with the fault. A full disk or a lock held elsewhere still lets
    reads through: only a write that succeeds ends those."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.since: float | None = None  # monotonic start of the current outage, None while answering
        self.kind: str | None = None
        self.reason = ""
        self.refused = 0
        self.generation = 0  # bumped when an outage starts: connections opened before it are suspect

    @property
    def active(self) -> bool:
        return self.since is not None

    def refuse(self, exc: BaseException, kind: str | None = None) -> DatabaseFault | None:
        """The answer for a unit that failed with `exc` (of `kind` when the caller knows it, e.g. a
        connection found dropped), recorded in the outage; None when `exc` is no database fault."""
        if isinstance(exc, DatabaseFault):
            return exc
        if isinstance(exc, ApiError) and kind is None:
            return None  # the domain's own answer (NotFound, Conflict...), whatever it was raised from
        kind = kind or fault_kind(exc)
        fault = fault_for(kind)
        if fault is None or kind is None:  # (no kind, no fault)
            return None
        fault.outage = self
        with self._lock:
            starting = self.since is None or kind != self.kind
            ended = self._end_locked() if starting and self.since is not None else None
            if starting:
                self.since, self.kind, self.reason, self.refused = self._clock(), kind, reason(exc), 0
                self.generation += 1
        if ended:
            log.warning(ended)
        if starting:
            log.warning("%s: %s; answering %d with Retry-After until it recovers (logged once per outage)",
                        _WHAT[kind], self.reason, fault.status)
        return fault

    def succeeded(self, write: bool, began_in: int | None = None) -> None:
        """A unit succeeded. `began_in`: the generation when it began. One that began before the current outage
        does not end it: it ran on a connection the database had not yet closed (a shutdown ends backends one
        by one), so the outage would read "available again after 0.0 s" and start over a moment later."""
        if self.since is None or (not write and self.kind in _WRITE_ONLY):
            return
        with self._lock:
            early = began_in is not None and began_in != self.generation
            ended = self._end_locked() if self.since is not None and not early else None
        if ended:
            log.warning(ended)

    def count_refusal(self) -> None:
        with self._lock:
            if self.since is not None:
                self.refused += 1

    def _end_locked(self) -> str:
        assert self.since is not None and self.kind is not None  # called only during an outage
        line = (f"{_AGAIN[self.kind]} after {self._clock() - self.since:.1f} s, "
                f"{self.refused} request{'s' if self.refused != 1 else ''} refused")
        self.since, self.kind = None, None
        return line

    def facts(self) -> dict[str, Any] | None:
        """For doctor: the current outage, or None."""
        since, kind = self.since, self.kind
        if since is None:
            return None
        return {"kind": kind, "reason": self.reason, "seconds": round(self._clock() - since, 1),
                "refused": self.refused}
