"""Storage: the runner that keeps database work off the event loop (connecting is in database.py,
schema migrations in migrations/, fixed SQL helpers in sql.py, the running unit's state in unit.py).

Every unit of work is a plain synchronous function. `Store.write` runs it on a writer thread inside a
transaction; writes queued together share one commit (each in its own savepoint, so one failing unit
never touches the others). `Store.read` runs on a small reader pool. Work done inside a unit may call
`after_commit` (and events.log.append does so for you); those effects are published on the event loop
only once the transaction has committed. Other processes (PostgreSQL) are told of them in the transaction
itself, which delivers them at its commit (`Store.teller`, Bus.telling).

Errors leave the store in one place per kind of unit (`_account`, after a read or a batch of writes): a
database that cannot be reached or used, or whose storage is full, becomes a DatabaseFault (503 or 507
with Retry-After, dbfaults.py) and is logged once per outage, not once per unit.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import os
import queue
import select
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Any, Callable, Protocol

import peewee as pw

from .database import PostgresDatabase, connection_state, is_sqlite, open_database
from .dbfaults import DOWN, Outage
from .events.bus import Tell
from .events.channels import EVENTS, Channel
from .migrations import migrate
from .models import database_proxy
# The SQL helpers (sql.py) and the unit-of-work state (unit.py), which units reach as `db.<name>`.
from .sql import (PreparedStatements, Row, current_database, every_column, for_update, highest_ids,  # noqa: F401
                  insert_rows, locked, model_from_row, sql_execute, sql_insert, sql_models, sql_rows, tuples)
from .timeutil import Clock
from .unit import Merge, Unmerged, _unit, after_commit, merge_of, merges, note_event, now  # noqa: F401

# What units of work reach as `db.<name>` (from sql.py and unit.py), and the store itself.
__all__ = ["Row", "Store", "Unmerged", "after_commit", "current_database", "every_column", "for_update", "is_sqlite",
           "locked", "merges", "model_from_row", "note_event", "now", "highest_ids", "insert_rows", "sql_execute",
           "sql_insert", "sql_models", "sql_rows", "tuples"]

log = logging.getLogger("coord.db")

_MAX_BATCH = 64
# PostgreSQL: a writer that finds more than this many units waiting takes half of them (up to _MAX_BATCH).
# Its batch mostly waits on the database's process, so the event loop answers the last batch and parses the
# next meanwhile; taking all of them made every request wait in one batch and the loop and the writer take
# turns (send +23 %, ingest +13 % at 32 connections, bench/RESULTS.md). Not on SQLite, whose batches run in
# this process: half batches there cost a commit each and gained nothing (send -16 %).
_SPLIT_ABOVE = 16


class Teller(Protocol):
    def telling(self) -> AbstractContextManager[Tell | None]: ...


def _merge_of(job: "_Job", sqlite: bool) -> Merge | None:
    """How `job` may run merged with its neighbours, if it may on this backend."""
    merge = merge_of(job.fn)
    if merge is None or job.kwargs or (sqlite and not merge.on_sqlite):
        return None
    return merge if merge.when(*job.args) else None


class _Job:
    __slots__ = ("fn", "args", "kwargs", "loop", "future", "result", "error", "effects", "max_event", "alone",
                 "event_types", "told")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], alone: bool = False) -> None:
        self.fn, self.args, self.kwargs, self.loop, self.future = fn, args, kwargs, loop, future
        self.alone = alone
        self.result: Any = None
        self.error: BaseException | None = None
        self.effects: list[tuple[Channel[Any], Any]] = []
        self.max_event: int | None = None
        self.event_types: list[str] = []
        self.told = False  # its effects were told to other processes in its transaction (Bus.telling)


class _FixedSavepoint:
    """SAVEPOINT / RELEASE (or ROLLBACK TO and RELEASE on error) with a fixed name. On PostgreSQL
    SAVEPOINT and RELEASE are deferred (PostgresDatabase): they ride along with the unit's first
    statement and the next unit's (or disappear at COMMIT, or when the unit executed nothing)."""

    def __init__(self, database: pw.Database, name: str) -> None:
        self.database = database
        self.postgres = database if isinstance(database, PostgresDatabase) else None  # deferring
        self.begin, self.release = f'SAVEPOINT "{name}"', f'RELEASE SAVEPOINT "{name}"'
        self.rollback = f'ROLLBACK TO SAVEPOINT "{name}"'

    def __enter__(self) -> None:
        if self.postgres is not None:
            self.postgres.defer(self.begin)
        else:
            self.database.execute_sql(self.begin)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.postgres is not None:
            if self.postgres.undefer(self.begin):
                return  # the unit sent no statement: there is nothing to release or undo
            if exc_type is not None:
                self.postgres.execute_sql(self.rollback)
            self.postgres.defer(self.release)
            return
        if exc_type is not None:
            self.database.execute_sql(self.rollback)
        self.database.execute_sql(self.release)


_CONFLICT_RETRIES = 3
_CONFLICT_CODES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure


def _is_conflict(exc: BaseException) -> bool:
    """A PostgreSQL deadlock or serialization failure: the transaction lost a race and may be rerun.
    Peewee wraps the driver's error and keeps it as `orig`."""
    return getattr(getattr(exc, "orig", exc), "pgcode", None) in _CONFLICT_CODES


def _server_spoke(conn: Any) -> bool:
    """Whether an idle PostgreSQL connection has something to read: a store connection never LISTENs,
    so between units that is the server saying goodbye (or, rarely, a parameter report: reconnecting
    then costs a connection, nothing else)."""
    try:
        return bool(select.select([conn], [], [], 0)[0])
    except Exception:  # its socket is gone (closed, or not a connection any more)
        return True


class _TransactionLost(Exception):
    """A batch's transaction ended under it (see Store._still_in_transaction)."""


def _settle(job: _Job) -> None:
    """On the event loop: hand a finished unit to its caller (unless it gave up waiting)."""
    if job.future.cancelled():
        return
    if job.error is not None:
        job.future.set_exception(job.error)
    else:
        job.future.set_result(job.result)


class Store:
    """Owns the database connection(s) and the threads that use them."""

    def __init__(self, url: str, clock: Clock | None = None, readers: int | None = None, prepare: bool = True,
                 pg_writers: int = 1) -> None:
        self.url = url
        self.clock = clock or Clock()
        self.guard_rule: Any = None  # domain/guards.LoopRule, set by the app from its settings (unit.guard_rule)
        self.database = open_database(url)
        self.sqlite = is_sqlite(self.database)
        if isinstance(self.database, PostgresDatabase):  # every database but SQLite (open_database)
            self.database.prepared = PreparedStatements(prepare)
        self.on_commit: Callable[[int | None, list[tuple[Channel[Any], Any]]], None] | None = None
        # PostgreSQL: the bus, which tells other processes of a transaction's effects in the transaction; then
        # `on_commit_told` publishes them here (bus.publish_told). None: each is published after its commit.
        self.teller: Teller | None = None
        self.on_commit_told: Callable[[int | None, list[tuple[Channel[Any], Any]]], None] | None = None
        self.on_events: Callable[[list[str]], None] | None = None  # types of the events a unit committed
        # Called on the event loop for every committed unit: (its function, whether it logged an event
        # or queued an after-commit effect). Caches use it to hear of writes that announce nothing.
        self.on_write: list[Callable[[Callable[..., Any], bool], None]] = []
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._writers: list[threading.Thread] = []
        self._reads: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        # SQLite reads run in this process and mostly in C, so threads beyond the two cores only fight
        # over the GIL: 4 readers served fewer inbox requests than 2 (bench/messages.md, round 3).
        # A PostgreSQL reader mostly waits on its socket, so more of them overlap usefully.
        self._reader_count = readers or (2 if self.sqlite else 4)
        self._readers: list[threading.Thread] = []
        # One writer batches every queued unit into one transaction (group commit). On PostgreSQL more
        # writers overlap round trips but make smaller batches, more commits and more GIL hand-offs:
        # with one, send made +3 % (one process) and +18 % (two workers) against two, and two beat four
        # (bench/RESULTS.md, "One writer per process"). More only help units that wait long on row
        # locks another process holds (COORD_PG_WRITERS).
        self._writer_count = 1 if self.sqlite else max(1, pg_writers)
        # Units of one batch run one after another, so they can share one savepoint name. Peewee's
        # atomic() names each savepoint with a fresh uuid: two statements the driver must prepare
        # anew per unit (measured: bench/RESULTS.md, "Figures from code comments").
        self._unit_savepoint = _FixedSavepoint(self.database, "coord_unit")
        self.write_latency_ms = 0.0
        self.outage = Outage()

    # lifecycle (called from the event loop via asyncio.to_thread, or directly by the CLI)
    def open(self) -> tuple[int | None, int]:
        database_proxy.initialize(self.database)
        self._bind_thread()
        result = migrate(self.database)
        for i in range(self._writer_count):
            thread = threading.Thread(target=self._writer_loop, name=f"coord-db-write-{i}", daemon=True)
            thread.start()
            self._writers.append(thread)
        for i in range(self._reader_count):
            thread = threading.Thread(target=self._reader_loop, name=f"coord-db-read-{i}", daemon=True)
            thread.start()
            self._readers.append(thread)
        return result

    def close(self) -> None:
        for _ in self._writers:
            self._queue.put(None)
        for thread in self._writers:
            thread.join(timeout=10)
        self._writers.clear()
        for _ in self._readers:
            self._reads.put(None)
        for thread in self._readers:
            thread.join(timeout=10)
        self._readers.clear()
        if not self.database.is_closed():
            self.database.close()

    def _bind_thread(self) -> None:
        _unit.clock = self.clock
        _unit.guard_rule = self.guard_rule
        database_proxy.bind_thread(self.database)

    # running units of work
    async def write(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put(_Job(fn, args, kwargs, loop, future))
        return await future

    async def write_alone(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Like write, but in a transaction of its own, never batched with other units.

        For units that lock many rows in a fixed order to stay deadlock-free against other processes:
        two such units sharing one batched transaction would each restart the order, and two
        processes doing that can deadlock (seen on PostgreSQL with two schedulers)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put(_Job(fn, args, kwargs, loop, future, alone=True))
        return await future

    async def write_until_done(self, fn: Callable[..., int], *args: Any) -> int:
        """Run `fn`, a unit doing one bounded part of a long job (pruning) and returning how much it
        did, until it does nothing; returns the total. Each part commits on its own, so other units
        are served in between instead of waiting behind one long transaction."""
        total = 0
        while done := await self.write(fn, *args):
            total += done
        return total

    async def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # Own reader threads fed by a SimpleQueue, answering with one call_soon_threadsafe: cheaper on
        # the event loop than run_in_executor's chained concurrent/asyncio futures (bench/messages.md, round 2).
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._reads.put(_Job(fn, args, kwargs, loop, future))
        return await future

    def run_sync(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """For the CLI and startup code, which own the thread they run on."""
        self._bind_thread()
        _unit.effects, _unit.max_event, _unit.event_types = [], None, []
        try:
            with self.database.atomic():
                result = fn(*args, **kwargs)
            if _unit.event_types and self.on_events:
                self.on_events(_unit.event_types)
            return result
        finally:
            _unit.effects = None

    def _reader_loop(self) -> None:
        self._bind_thread()
        _unit.read_only = True
        while True:
            job = self._reads.get()
            if job is None:
                break
            self._forget_stale_connection()
            self._read_once(job)
            lost = False
            if job.error is not None and self._drop_lost_connection():
                job.error = None  # a read is safe to repeat: once more on a fresh connection
                self._read_once(job)
                lost = job.error is not None and self._drop_lost_connection()
            self._account([job], write=False, lost=lost)
            try:
                job.loop.call_soon_threadsafe(self._finish_read, job)
            except RuntimeError:  # that loop has closed: nobody waits; keep serving the others
                pass
        if not self.database.is_closed():
            self.database.close()

    def _writer_loop(self) -> None:
        self._bind_thread()
        while True:
            job = self._queue.get()
            if job is None:
                break
            self._forget_stale_connection()
            batch = [job]
            limit = self._batch_limit(self._queue.qsize() + 1)
            while not job.alone and len(batch) < limit:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)
                    break
                if more.alone:
                    self._run_batch(batch)
                    batch = [more]
                    break
                batch.append(more)
            self._run_batch(batch)
        if not self.database.is_closed():
            self.database.close()

    def _batch_limit(self, waiting: int) -> int:
        if self.sqlite or waiting <= _SPLIT_ABOVE:
            return _MAX_BATCH
        return min(_MAX_BATCH, max(_SPLIT_ABOVE, (waiting + 1) // 2))

    def _run_batch(self, batch: list[_Job]) -> None:
        started = time.perf_counter()
        self._commit(batch)
        # PostgreSQL: units of different writer threads' batches can lock the same rows in opposite
        # orders; the server then aborts one unit (its savepoint) as a deadlock victim. Nothing of it
        # was kept, so it is safe to run it again, now that this batch's locks are released, on its own.
        for job in batch:
            for _ in range(_CONFLICT_RETRIES):
                if not self._conflicted(job):
                    break
                log.info("a unit lost a lock race (%s); running it again on its own", job.error)
                self._commit([job])
        self._account(batch, write=True)
        self.write_latency_ms = (time.perf_counter() - started) * 1000
        # One wake-up of each waiting event loop per batch, not one per unit.
        by_loop: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
        for job in batch:
            by_loop.setdefault(job.loop, []).append(job)
        for loop, jobs in by_loop.items():
            loop.call_soon_threadsafe(self._finish_all, jobs)

    def _finish_read(self, job: _Job) -> None:
        if job.error is None and job.effects and self.on_commit:
            try:
                self.on_commit(None, job.effects)
            except Exception:
                log.exception("publishing a read's effects failed")
        _settle(job)

    def _read_once(self, job: _Job) -> None:
        _unit.effects = []
        job.error = None
        try:
            if self.sqlite:
                with self.database.atomic():
                    job.result = job.fn(*job.args, **job.kwargs)
            else:
                # No transaction: under READ COMMITTED every statement of a transaction takes its own
                # snapshot anyway, so BEGIN and COMMIT would only add two round trips per read.
                job.result = job.fn(*job.args, **job.kwargs)
        except BaseException as exc:
            job.error = exc
        else:
            job.effects = _unit.effects
        finally:
            _unit.effects = None

    def _drop_lost_connection(self) -> bool:
        """After a failure on PostgreSQL: if the server closed this thread's connection (a restart, a
        failover, a network cut), forget it so the next unit connects afresh. True if it did."""
        if self.sqlite:
            return False
        conn = connection_state(self.database).conn  # connection() would open a new one
        if conn is None or not getattr(conn, "closed", 0):
            return False
        self._close_connection()
        return True

    def _close_connection(self) -> None:
        try:
            self.database.close()
        except Exception:
            connection_state(self.database).reset()

    def _forget_stale_connection(self) -> None:
        """PostgreSQL, before a unit: drop this thread's connection if it is known or seen to be dead,
        so the unit runs on a fresh one instead of failing. Known: an outage has begun since the thread
        last looked (every thread then reconnects once). Seen: the server spoke on the idle connection
        (it sends its FATAL, and closes, when it shuts down or the backend is terminated), which one
        select() call tells without a round trip. A restart or a killed backend between units then
        costs no request a 503."""
        generation = self.outage.generation
        stale = getattr(_unit, "generation", 0) != generation
        _unit.generation = generation  # also the outage generation the unit begins in (_account)
        if self.sqlite:
            return
        conn = connection_state(self.database).conn
        if conn is not None and (stale or conn.closed or _server_spoke(conn)):
            self._close_connection()

    def _account(self, jobs: list[_Job], write: bool, lost: bool = False) -> None:
        """Where errors leave the store: a unit that met a database fault answers 503 or 507 (logged once
        per outage by `self.outage`, not per unit); a unit that succeeded may end an outage."""
        succeeded = False
        for job in jobs:
            if job.error is None:
                succeeded = True
            else:
                job.error = self.outage.refuse(job.error, DOWN if lost else None) or job.error
        if succeeded:
            self.outage.succeeded(write, began_in=getattr(_unit, "generation", None))

    def _commit(self, jobs: list[_Job]) -> None:
        for groups in self._transactions(self._groups(jobs)):
            self._commit_groups(groups)

    def _transactions(self, groups: list[list[_Job]]) -> Iterator[list[list[_Job]]]:
        """The batch's groups, in one transaction each run of them; on PostgreSQL a merged group holding rows
        FOR SHARE (Merge.shares_locks) has a transaction of its own. After it, a unit of the same transaction
        updating such a row would wait for another process's batch holding the row too, which might wait the same
        way; before it, a unit could hold a row that another process's transaction locks after the batch's."""
        current: list[list[_Job]] = []
        for group in groups:
            merge = merge_of(group[0].fn) if len(group) > 1 and not self.sqlite else None
            if merge is not None and merge.shares_locks:
                if current:
                    yield current
                yield [group]
                current = []
            else:
                current.append(group)
        if current:
            yield current

    def _commit_groups(self, groups: list[list[_Job]]) -> None:
        """Run the groups' units in one transaction, each in its own savepoint."""
        telling = self.teller.telling() if self.teller is not None else nullcontext(None)
        try:
            # SQLite: take the write lock up front. A deferred transaction that reads first and writes
            # later fails at once with "database is locked" when another process wrote meanwhile;
            # BEGIN IMMEDIATE waits (busy_timeout) instead, so several processes can share one file.
            with telling as tell, self.database.atomic("IMMEDIATE") if self.sqlite else self.database.atomic():
                for group in groups:
                    if len(group) > 1:
                        self._run_merged(group)
                    else:
                        self._run_job(group[0])
                    self._still_in_transaction(group)
                if tell is not None:
                    self._tell(tell, [job for group in groups for job in group if job.error is None])
        except Exception as exc:  # the commit itself failed: every unit in it failed
            # PostgreSQL, connection lost: whether the server saw the COMMIT is unknown, so the units are
            # not retried here; callers get 503 and the next unit opens a fresh connection.
            lost = self._drop_lost_connection()
            self._end_broken_transaction()
            fault = self.outage.refuse(exc, DOWN if lost else None)
            if fault is None and not _is_conflict(exc):
                log.exception("database commit failed")
            for job in (job for group in groups for job in group):
                job.error = copy.copy(fault) if fault is not None else exc
                job.effects, job.max_event, job.event_types, job.told = [], None, [], False

    def _tell(self, tell: Tell, jobs: list[_Job]) -> None:
        """Tell other processes, in the transaction, what its units will publish once it commits."""
        highest = max((job.max_event for job in jobs if job.max_event is not None), default=None)
        messages: list[tuple[Channel[Any], Any]] = [] if highest is None else [(EVENTS, {"maxId": highest})]
        messages += [effect for job in jobs for effect in job.effects]
        if messages:
            tell(self.database.execute_sql, messages)
            for job in jobs:
                job.told = True

    def _still_in_transaction(self, group: list[_Job], failure: Exception | None = None) -> None:
        """SQLite may roll the whole transaction back by itself when a statement fails (a full disk, an
        I/O error): the batch's earlier units are undone and later ones would run outside any
        transaction, each committing alone. Then the whole batch fails, with that unit's error."""
        if self.sqlite and not self.database.connection().in_transaction:
            cause = failure or next((job.error for job in group if job.error is not None), None)
            raise _TransactionLost("SQLite rolled the transaction back after a failed statement") from cause

    def _end_broken_transaction(self) -> None:
        """SQLite: after a failed commit or rollback (a full disk), leave no transaction open on the
        writer's connection, or the next batch's BEGIN would fail."""
        conn = connection_state(self.database).conn if self.sqlite else None
        if conn is not None and conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except Exception:
                log.warning("rolling back a failed SQLite transaction failed; reopening the connection")
                self._close_connection()

    def _conflicted(self, job: _Job) -> bool:
        return not self.sqlite and job.error is not None and _is_conflict(job.error)

    def _finish_all(self, jobs: list[_Job]) -> None:
        """The batch's units, committed together: their log rows are announced once, as the batch's highest
        (where the first unit that wrote any would announce its own), then each unit's other effects. Every
        effect still follows the announcement of its unit's rows, and one announcement per batch instead of
        one per unit spares every listener (and PostgreSQL's NOTIFY) a call per send."""
        highest = max((job.max_event for job in jobs if job.error is None and job.max_event is not None),
                      default=None)
        for job in jobs:
            announce = highest if job.error is None and job.max_event is not None else None
            if announce is not None:
                highest = None
            self._finish(job, announce)
        # Counted once for the batch: with several worker processes each count is a write to a shared file.
        event_types = [event_type for job in jobs if job.error is None for event_type in job.event_types]
        if event_types and self.on_events:
            try:
                self.on_events(event_types)
            except Exception:
                log.exception("counting committed events failed")

    def _groups(self, jobs: list[_Job]) -> list[list[_Job]]:
        """Consecutive jobs that may run merged (db.merges), else one job per group."""
        groups: list[list[_Job]] = []
        last: Merge | None = None
        for job in jobs:
            merge = _merge_of(job, self.sqlite)
            if merge is not None and last is merge and groups:
                groups[-1].append(job)
            else:
                groups.append([job])
            last = merge
        return groups

    def _run_merged(self, group: list[_Job]) -> None:
        merge = merge_of(group[0].fn)
        assert merge is not None  # _groups put it in a group of more than one
        many = merge.many
        _unit.effects, _unit.max_event, _unit.event_types = [], None, []
        try:
            with self._unit_savepoint:
                finishers = many([job.args for job in group])
        except Unmerged:
            for job in group:
                self._run_job(job)
            return
        except Exception as failure:
            self._still_in_transaction(group, failure)  # else the calls would each run, and commit, alone
            log.info("a merged unit failed; running its %d calls one by one", len(group), exc_info=True)
            for job in group:
                self._run_job(job)
            return
        for job, finish in zip(group, finishers):
            self._capture(job, finish)  # no SQL: the merged statement did the database work

    def _run_job(self, job: _Job) -> None:
        def in_savepoint() -> Any:
            with self._unit_savepoint:
                return job.fn(*job.args, **job.kwargs)
        self._capture(job, in_savepoint)

    @staticmethod
    def _capture(job: _Job, run: Callable[[], Any]) -> None:
        """Run `run` as `job`'s unit: its result or error, and the events and effects it noted."""
        job.error, job.told = None, False
        _unit.effects, _unit.max_event, _unit.event_types = [], None, []
        try:
            job.result = run()
            job.effects, job.max_event, job.event_types = _unit.effects, _unit.max_event, _unit.event_types
        except Exception as exc:
            job.error = exc
        finally:
            _unit.effects, _unit.max_event = None, None

    def _finish(self, job: _Job, announce: int | None) -> None:
        """`announce`: the highest log row to announce with this unit's effects (None: announced already)."""
        publish = self.on_commit_told if job.told and self.on_commit_told else self.on_commit
        if job.error is None and publish and (announce is not None or job.effects):
            try:
                publish(announce, job.effects)
            except Exception:
                log.exception("publishing committed effects failed")
        if job.error is None:
            announced = job.max_event is not None or bool(job.effects)
            for hook in self.on_write:
                try:
                    hook(job.fn, announced)
                except Exception:
                    log.exception("a write hook failed")
        _settle(job)

    # facts for doctor
    def storage_facts(self) -> dict[str, Any]:
        """Free and total bytes of the filesystem holding the SQLite database (a syscall: call it off the
        event loop). PostgreSQL's disk is the database server's: None here."""
        if not self.sqlite:
            return {"freeBytes": None, "totalBytes": None, "path": None}
        directory = os.path.dirname(os.path.abspath(self.database.database))
        stats = os.statvfs(directory)
        return {"freeBytes": stats.f_bavail * stats.f_frsize, "totalBytes": stats.f_blocks * stats.f_frsize,
                "path": directory}

    def size_bytes(self) -> int | None:
        if self.sqlite:
            path = self.database.database
            return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
        size: int = self.database.execute_sql("SELECT pg_database_size(current_database())").fetchone()[0]
        return size
