"""The bus announces what happened; it carries no durable state.

Its channels, each with the shape of its payloads, are declared in events/channels.py; publishers
and subscribers pass those values, never strings.

LocalBus serves one process. PostgresBus (LISTEN/NOTIFY) lets several processes share one database;
callers cannot tell which one runs. A unit of work's effects are NOTIFYed in its own transaction
(`telling`, used by the store's writer); everything else through the bus's NOTIFY thread.
"""
from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
import time
import uuid
from collections import defaultdict
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, TypeVar, runtime_checkable

from .channels import BUS, EVENTS, Channel

if TYPE_CHECKING:
    from psycopg2.extensions import connection as PgConnection

log = logging.getLogger("coord.bus")

Callback = Callable[[dict], None]
P = TypeVar("P")
# A Tell gets the database connection's execute(sql, params) and a transaction's messages (channel, payload),
# and tells other processes of them in that transaction.
Execute = Callable[[str, list[Any]], Any]
Tell = Callable[[Execute, list[tuple[Channel[Any], Any]]], None]
_encode = json.JSONEncoder(separators=(",", ":")).encode


@runtime_checkable
class Bus(Protocol):
    """What the app needs of a bus; LocalBus and PostgresBus provide it."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def subscribe(self, channel: Channel[P], callback: Callable[[P], None]) -> Callable[[], None]:
        """Callbacks run on the event loop and must not block; the result unsubscribes."""
        ...

    def publish(self, channel: Channel[P], payload: P) -> None:
        """To every process's subscribers (this one's at once)."""
        ...

    def publish_here(self, channel: Channel[P], payload: P) -> None:
        """To this process's subscribers only."""
        ...

    def limit_reach(self, channel: Channel[P], heard_elsewhere: Callable[[P], bool]) -> None:
        """From now on, a publish on `channel` goes to other processes only when `heard_elsewhere(payload)`
        says someone there may hear it; this process's subscribers always hear it."""
        ...

    def solitude(self) -> int | None:
        """While this process is the only server on its database, so that every write to it is one of this
        process's own units (which its caches hear of at once): a number that changes each time it becomes
        so. None while another server may write."""
        ...

    def telling(self) -> AbstractContextManager[Tell | None]:
        """On a writer thread, around a transaction through its commit: a `Tell` that tells other processes of
        the transaction's effects in it (so they hear them exactly when it commits), or None when nobody
        else would hear (one process; a server alone). What a Tell took is then published with
        `publish_told`."""
        ...

    def publish_told(self, channel: Channel[P], payload: P) -> None:
        """`publish` of what a Tell has told other processes already: to this process's subscribers, and
        elsewhere only on channels a Tell leaves out (those whose reach is limited)."""
        ...


class LocalBus:
    def __init__(self) -> None:
        self._subscribers: dict[str, list[Callback]] = defaultdict(list)
        self._reach: dict[str, Callable[[Any], bool]] = {}

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        self._subscribers.clear()

    def subscribe(self, channel: Channel[P], callback: Callable[[P], None]) -> Callable[[], None]:
        """Callbacks run on the event loop and must not block."""
        name = channel.name
        self._subscribers[name].append(callback)  # type: ignore[arg-type]

        def unsubscribe() -> None:
            try:
                self._subscribers[name].remove(callback)  # type: ignore[arg-type]
            except ValueError:
                pass
            if not self._subscribers.get(name):
                self._subscribers.pop(name, None)
        return unsubscribe

    def publish(self, channel: Channel[P], payload: P) -> None:
        self._deliver(channel.name, payload)  # type: ignore[arg-type]

    def publish_here(self, channel: Channel[P], payload: P) -> None:
        """For this process's subscribers only (never NOTIFYed): what every process computes for itself."""
        self._deliver(channel.name, payload)  # type: ignore[arg-type]

    def limit_reach(self, channel: Channel[P], heard_elsewhere: Callable[[P], bool]) -> None:
        self._reach[channel.name] = heard_elsewhere

    def solitude(self) -> int | None:
        """A local bus serves one process: SQLite is served by one process (DESIGN.md)."""
        return 1

    def telling(self) -> AbstractContextManager[Tell | None]:
        return nullcontext(None)

    def publish_told(self, channel: Channel[P], payload: P) -> None:
        self.publish(channel, payload)

    def _deliver(self, channel: str, payload: dict) -> None:
        for callback in list(self._subscribers.get(channel, ())):
            try:
                callback(payload)
            except Exception:
                log.exception("bus subscriber on %s failed", channel)


RECONNECT_MIN_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 10.0
NOTIFY_BYTES = 7900  # PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more


def _notifiable(name: str, payload: Any) -> str | None:
    """[name, payload] encoded for a NOTIFY, or None (logged) if it is too large for one: then only this
    process's subscribers hear it."""
    text = _encode([name, payload])
    if len(text.encode()) > NOTIFY_BYTES:
        log.warning("bus payload on %s too large for NOTIFY (%d bytes); delivered locally only", name, len(text))
        return None
    return text


def _packed(origin: str, messages: list[tuple[str, dict, str]]) -> list[str]:
    """NOTIFY payloads {"o": origin, "m": [[channel, payload], ...]}, each under NOTIFY_BYTES, in order.
    `messages` are (channel, payload, its encoded [channel, payload]). Repeated `events`
    announcements fold into one carrying the highest maxId: readers only need the highest."""
    events = [m for m in messages if m[0] == EVENTS.name]
    if len(events) > 1:
        top = max(events, key=lambda m: m[1].get("maxId") or 0)
        messages = [m for m in messages if m[0] != EVENTS.name or m is top]
    payloads: list[str] = []
    current: list[str] = []
    size = 0
    head = '{"o":"' + origin + '","m":['
    for _channel, _payload, text in messages:
        length = len(text.encode()) + 1
        if current and len(head) + size + length + 2 > NOTIFY_BYTES:
            payloads.append(head + ",".join(current) + "]}")
            current, size = [], 0
        current.append(text)
        size += length
    if current:
        payloads.append(head + ",".join(current) + "]}")
    return payloads


class _FailureRun:
    """A run of failures of one kind logged as one warning (the rest at debug) until it succeeds again:
    while PostgreSQL is down the bus retries every few seconds, and each attempt is no news."""

    def __init__(self) -> None:
        self.failing = False

    def failed(self, message: str, *args) -> None:
        (log.debug if self.failing else log.warning)(message + ("" if self.failing else " (said once until it recovers)"),
                                                     *args)
        self.failing = True

    def recovered(self) -> bool:
        """True if this ends a run of failures."""
        was, self.failing = self.failing, False
        return was


# The advisory lock (two int4 keys: 'coor', 'd' + 1) that says which servers share a database. Advisory locks are
# per database, so deployments on other databases of the same cluster never meet.
SOLITUDE_KEY = (0x636F6F72, 0x64000001)
SOLITUDE_CHECK_SECONDS = 0.5  # how often the one alone looks for a newcomer whose notice it missed


class PostgresBus(LocalBus):
    """LISTEN/NOTIFY on one channel; every process hears every other process's publishes.

    A listener thread owns its own psycopg2 connection and hands notifications to the loop.
    Local subscribers also hear local publishes directly (the echo from PostgreSQL is skipped).

    Solitude (`solitude()`): the listening connection holds the advisory lock SOLITUDE_KEY, exclusively while
    this server is the only one on its database, shared otherwise. A server that starts takes it shared before
    it serves anything (its bus's start waits for that), so while one server holds it exclusively no other
    server can write. To let a newcomer in, the one alone first stops counting on solitude on its event loop,
    then gives the exclusive hold up; the newcomer tells it on the bus (and it looks for waiters every
    SOLITUDE_CHECK_SECONDS, should that notice be lost). A server sharing the lock takes it exclusively as soon
    as it is the last holder. While alone, publishes are not NOTIFYed: nobody would hear them, and a server
    that joins starts from the database after the one alone has stopped counting on solitude.
    """

    CHANNEL = "coord_bus"

    def __init__(self, dsn_kwargs: dict[str, Any]) -> None:
        super().__init__()
        self._dsn = dsn_kwargs
        self._origin = uuid.uuid4().hex[:12]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._send_conn: PgConnection | None = None
        self._outbox: queue.SimpleQueue[tuple[str, Any, str] | None] = queue.SimpleQueue()
        self._sender: threading.Thread | None = None
        self._publish_failures = _FailureRun()
        self._listen_failures = _FailureRun()
        self._solitude: int | None = None  # on the event loop: see solitude()
        self._solitudes = 0
        self._exclusive = False  # on the listener thread: the listening connection holds SOLITUDE_KEY alone
        # Transactions between a writer's look at solitude (alone: it tells nobody) and their commit; giving
        # solitude up waits for them (see `telling`).
        self._untold = threading.Condition()
        self._untold_in_flight = 0

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._send_conn = await asyncio.to_thread(self._connect)
        self._sender = threading.Thread(target=self._send_loop, name="coord-bus-notify", daemon=True)
        self._sender.start()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._listen, args=(ready,), name="coord-bus-listen", daemon=True)
        self._thread.start()
        await asyncio.to_thread(ready.wait, 10)

    async def stop(self) -> None:
        self._solitude = None
        self._stop.set()
        if self._thread:
            await asyncio.to_thread(self._thread.join, 5)
        if self._sender:
            self._outbox.put(None)
            await asyncio.to_thread(self._sender.join, 5)
        if self._send_conn is not None:
            self._send_conn.close()
        await super().stop()

    def _connect(self) -> PgConnection:
        import psycopg2
        conn = psycopg2.connect(**self._dsn)
        conn.autocommit = True
        return conn

    def solitude(self) -> int | None:
        return self._solitude

    # solitude: the lock is taken, given up and checked on the listener thread, on the listening connection;
    # what the event loop counts on changes on the loop.
    def _gain_solitude(self) -> None:
        self._solitudes += 1
        self._solitude = self._solitudes

    def _lose_solitude(self, done: threading.Event | None = None) -> None:
        self._solitude = None
        if done is not None:
            done.set()

    def _on_loop(self, callback: Callable[..., None], *args: Any) -> bool:
        """From the listener thread; False if the loop has closed (then nothing on it counts on anything)."""
        assert self._loop is not None  # set by start(), before this thread
        try:
            self._loop.call_soon_threadsafe(callback, *args)
            return True
        except RuntimeError:
            return False

    def _lose_solitude_first(self) -> None:
        """Returns once the event loop no longer counts on solitude (or has stopped) and every transaction that
        counted on it to tell nobody has committed."""
        done = threading.Event()
        if not self._on_loop(self._lose_solitude, done):
            return
        while not done.wait(0.5):
            if self._stop.is_set() or self._loop is None or self._loop.is_closed():
                return
        with self._untold:
            while self._untold_in_flight and not self._stop.is_set():
                self._untold.wait(0.5)

    def _lock(self, conn, function: str) -> bool:
        with conn.cursor() as cursor:
            cursor.execute(f"SELECT {function}(%s, %s)", SOLITUDE_KEY)
            return cursor.fetchone()[0] is not False

    def _join(self, conn) -> None:
        """On a fresh listening connection: alone, or one of several once any server alone has let us in."""
        if self._lock(conn, "pg_try_advisory_lock"):
            self._exclusive = True
            self._on_loop(self._gain_solitude)
            return
        with conn.cursor() as cursor:  # a server alone gives its hold up sooner when told
            cursor.execute("SELECT pg_notify(%s, %s)", (self.CHANNEL, '{"o":"' + self._origin + '","j":1}'))
            # One that does not (its event loop stuck): this connection fails, and listening is tried again.
            cursor.execute("SET lock_timeout = '5s'")
        self._lock(conn, "pg_advisory_lock_shared")
        with conn.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")

    def _share(self, conn) -> None:
        """Let a newcomer in: the loop stops counting on solitude before the exclusive hold goes."""
        self._lose_solitude_first()
        self._lock(conn, "pg_advisory_lock_shared")  # held beside our own exclusive hold, never conflicting
        self._lock(conn, "pg_advisory_unlock")
        self._exclusive = False

    def _check_solitude(self, conn) -> None:
        """Alone: is a newcomer waiting? Sharing: are we the last holder?"""
        if not self._exclusive:
            if self._lock(conn, "pg_try_advisory_lock"):
                self._lock(conn, "pg_advisory_unlock_shared")
                self._exclusive = True
                self._on_loop(self._gain_solitude)
            return
        with conn.cursor() as cursor:
            cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
                           "AND objid = %s AND objsubid = 2 AND NOT granted AND database = "
                           "(SELECT oid FROM pg_database WHERE datname = current_database()))", SOLITUDE_KEY)
            waiting = cursor.fetchone()[0]
        if waiting:
            self._share(conn)

    def publish(self, channel: Channel[P], payload: P) -> None:
        name = channel.name
        self._deliver(name, payload)  # type: ignore[arg-type]
        if self._solitude is not None:
            return  # no other server to tell: one that starts reads the database after it has let it in
        heard_elsewhere = self._reach.get(name)
        if heard_elsewhere is not None and not heard_elsewhere(payload):
            return
        message = _notifiable(name, payload)
        if message is not None:
            self._outbox.put((name, payload, message))

    @contextmanager
    def telling(self) -> Iterator[Tell | None]:
        """A transaction's effects NOTIFYed in it: PostgreSQL delivers them at its commit, and only if it
        commits, with no transaction, thread hand-off or round trip of their own (a NOTIFY outside one is a
        transaction with a commit record). Alone, nobody is told; the hold on solitude lasts until the commit,
        so a server that joins meanwhile starts from the database after it."""
        with self._untold:
            alone = self._solitude is not None
            if alone:
                self._untold_in_flight += 1
        try:
            yield None if alone else self._tell
        finally:
            if alone:
                with self._untold:
                    self._untold_in_flight -= 1
                    self._untold.notify_all()

    def _tell(self, execute: Execute, messages: list[tuple[Channel[Any], Any]]) -> None:
        batch = []
        for channel, payload in messages:
            if channel.name in self._reach:
                continue  # published after the commit, where its reach is decided
            text = _notifiable(channel.name, payload)
            if text is not None:
                batch.append((channel.name, payload, text))
        if batch:
            payloads = _packed(self._origin, batch)
            execute("SELECT " + ", ".join(["pg_notify(%s, %s)"] * len(payloads)),
                    [value for payload in payloads for value in (self.CHANNEL, payload)])

    def publish_told(self, channel: Channel[P], payload: P) -> None:
        if channel.name in self._reach:
            self.publish(channel, payload)
        else:
            self._deliver(channel.name, payload)  # type: ignore[arg-type]

    def _send_loop(self) -> None:
        """The one thread that NOTIFYs. Whatever was published while it was sending goes out together:
        as few NOTIFYs as fit the payload limit, in one statement (one round trip), where every publish
        once cost a thread-pool hop and a round trip of its own on one shared connection (a send
        publishes twice: `events` and `wake`)."""
        while True:
            first = self._outbox.get()
            if first is None:
                return
            batch = [first]
            while True:
                try:
                    more = self._outbox.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._outbox.put(None)
                    break
                batch.append(more)
            self._notify(_packed(self._origin, batch))

    def _notify(self, payloads: list[str]) -> None:
        """Send the NOTIFYs; a lost connection is replaced once. What still fails is logged: other
        processes catch up from the event log (see `reconnected` below), never from the bus alone."""
        import psycopg2
        sql = "SELECT " + ", ".join(["pg_notify(%s, %s)"] * len(payloads))
        params = [value for payload in payloads for value in (self.CHANNEL, payload)]
        for attempt in (1, 2):
            try:
                if self._send_conn is None or self._send_conn.closed:
                    self._send_conn = self._connect()
                with self._send_conn.cursor() as cursor:
                    cursor.execute(sql, params)
                self._publish_failures.recovered()
                return
            except psycopg2.Error as exc:
                if self._send_conn is not None and not self._send_conn.closed:
                    log.exception("bus publish failed")  # the connection is fine: not an outage
                    return
                self._send_conn = None
                if attempt == 2:
                    self._publish_failures.failed("bus publish failed (%s); other processes will catch up",
                                                  " ".join(str(exc).split()))

    def _listen(self, ready: threading.Event) -> None:
        """LISTEN, and after losing the connection LISTEN again (with backoff) until stopped. After a
        reconnect, local subscribers hear `reconnected` on the `bus` channel: NOTIFYs sent while this
        process was not listening are gone, so whoever relies on them catches up from the database."""
        import psycopg2
        delay, connected_before = RECONNECT_MIN_SECONDS, False
        while not self._stop.is_set():
            try:
                conn = self._connect()
                with conn.cursor() as cursor:
                    cursor.execute(f"LISTEN {self.CHANNEL}")
                self._join(conn)
            except psycopg2.Error as exc:
                self._listen_failures.failed("bus: cannot listen (%s); retrying every %.0f s at most",
                                             " ".join(str(exc).split()), RECONNECT_MAX_SECONDS)
                self._stop.wait(delay)
                delay = min(delay * 2, RECONNECT_MAX_SECONDS)
                continue
            ready.set()
            self._listen_failures.recovered()
            if connected_before:
                log.info("bus: listening again")
                assert self._loop is not None  # set by start(), before this thread
                self._loop.call_soon_threadsafe(self._deliver, BUS.name, {"kind": "reconnected"})
            connected_before, delay = True, RECONNECT_MIN_SECONDS
            try:
                self._relay_notifications(conn)
            except psycopg2.Error as exc:
                self._listen_failures.failed("bus: lost the listening connection (%s); reconnecting",
                                             " ".join(str(exc).split()))
            finally:
                # The lock goes with the connection. A server starting meanwhile may take it before this
                # thread has noticed the loss: only for as long as noticing takes (a closed socket: at once).
                self._exclusive = False
                self._on_loop(self._lose_solitude)
                conn.close()

    def _relay_notifications(self, conn) -> None:
        import select
        own = '{"o":"' + self._origin + '"'
        checked = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - checked >= SOLITUDE_CHECK_SECONDS:
                self._check_solitude(conn)
                checked = time.monotonic()
            if select.select([conn], [], [], SOLITUDE_CHECK_SECONDS) == ([], [], []):
                continue
            conn.poll()
            while conn.notifies:
                note = conn.notifies.pop(0)
                if note.payload.startswith(own):  # our own publishes echo back: skip them unparsed
                    continue
                try:
                    message = json.loads(note.payload)
                except ValueError:
                    continue
                if not isinstance(message, dict) or message.get("o") == self._origin:
                    continue
                if message.get("j") and self._exclusive:  # a server starting on our database
                    self._share(conn)
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._deliver_all, message.get("m") or [])

    def _deliver_all(self, messages: list) -> None:
        for item in messages:
            if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
                self._deliver(item[0], item[1])


def make_bus(database) -> Bus:
    import peewee as pw
    if isinstance(database, pw.PostgresqlDatabase):
        params = dict(database.connect_params)
        params["dbname"] = database.database
        return PostgresBus(params)
    return LocalBus()
