"""The bus announces what happened; it carries no durable state.

Its channels, each with the shape of its payloads, are declared in events/channels.py; publishers
and subscribers pass those values, never strings.

LocalBus serves one process. PostgresBus (LISTEN/NOTIFY) lets several processes share one database;
callers cannot tell which one runs.
"""
from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
import uuid
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar, runtime_checkable

from .channels import BUS, EVENTS, Channel

if TYPE_CHECKING:
    from psycopg2.extensions import connection as PgConnection

log = logging.getLogger("coord.bus")

Callback = Callable[[dict], None]
P = TypeVar("P")


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

    def _deliver(self, channel: str, payload: dict) -> None:
        for callback in list(self._subscribers.get(channel, ())):
            try:
                callback(payload)
            except Exception:
                log.exception("bus subscriber on %s failed", channel)


RECONNECT_MIN_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 10.0
NOTIFY_BYTES = 7900  # PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more


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


class PostgresBus(LocalBus):
    """LISTEN/NOTIFY on one channel; every process hears every other process's publishes.

    A listener thread owns its own psycopg2 connection and hands notifications to the loop.
    Local subscribers also hear local publishes directly (the echo from PostgreSQL is skipped).
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

    def publish(self, channel: Channel[P], payload: P) -> None:
        name = channel.name
        self._deliver(name, payload)  # type: ignore[arg-type]
        heard_elsewhere = self._reach.get(name)
        if heard_elsewhere is not None and not heard_elsewhere(payload):
            return
        message = json.dumps([name, payload], separators=(",", ":"))
        if len(message.encode()) > NOTIFY_BYTES:
            log.warning("bus payload on %s too large for NOTIFY (%d bytes); delivered locally only",
                        name, len(message))
            return
        self._outbox.put((name, payload, message))

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
                conn.close()

    def _relay_notifications(self, conn) -> None:
        import select
        own = '{"o":"' + self._origin + '"'
        while not self._stop.is_set():
            if select.select([conn], [], [], 0.5) == ([], [], []):
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
