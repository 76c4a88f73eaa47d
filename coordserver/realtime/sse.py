"""The SSE hub: one reader of the event log fans new events out to every open stream.

The bus says "the log has rows up to id N"; the hub reads each new row once and hands the encoded
frame to the bounded queue of every connection entitled to it. A connection that falls too far
behind is closed (it resumes with Last-Event-ID), so a stuck client never holds up the hub or other
streams. Resume replays from the log itself, so a stream never depends on what the hub kept.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections import deque
from datetime import timedelta
from functools import partial
from typing import Callable, NamedTuple

from .. import jsonstrict
from ..errors import DatabaseFault, log_background_failure
from ..events import log as event_log
from ..domain.identities import REVOCATION_EVENT
from ..metrics import process_metrics
from .logreader import GapTracker
from .presence import PresenceTracker
from .revocation import TokenGuard
from .streams_elsewhere import StreamsElsewhere
from ..events.channels import BUS, CONTROL, EPHEMERAL, EVENTS, STREAM_HINTS, WAKE

log = logging.getLogger("coord.sse")

QUEUE_SIZE = 1000          # frames a connection may have waiting before it counts as a slow consumer
QUEUE_BYTES = 1 << 20      # ... or bytes of frames (shared with other streams, but kept alive by this one)
CHUNK_BYTES = 64 << 10     # at most this much is joined into one write: a per-connection copy
FORCE_CLOSE_SECONDS = 1.0  # a stream that cannot even take its closing comment is cut after this
PRUNE_INTERVAL_SECONDS = 3600.0
READ_BATCH = 1000
# PostgreSQL with no stream open in this process: the hub still reads the heads of new rows (to act on
# control rows and to keep its place exact), but lets announcements gather this long first: one read
# instead of one per commit (4 % of a loaded worker's time). A stream opening or a control row ends it.
IDLE_GATHER_SECONDS = 0.1
CATCH_UP_SECONDS = 0.5
CONTROL_TYPES = frozenset({REVOCATION_EVENT})  # rows with no audience that this process must act on

HEARTBEAT = b": heartbeat\n\n"
DATABASE_CLOSING = b": closing: database unavailable; resume with Last-Event-ID\n\n"
# The comment a stream ends with, by the reason it was closed (shutdown ends it without one).
CLOSING = {
    "slow": b": closing: slow consumer\n\n",
    "too_many": b": closing: too many streams\n\n",
    "revoked": b": closing: token revoked\n\n",
    "rotated": b": closing: token revoked\n\n",
    "expired": b": closing: token expired\n\n",
    "archived": b": closing: identity archived\n\n",
}


def encode_frame(event_type: str, data: dict, event_id: str | None = None) -> bytes:
    """One SSE frame; `data` is one line of JSON (json.dumps escapes every newline); `event_id` is the
    event's stream id (events/log.py tagged_id)."""
    body = jsonstrict.dumps(data)
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event_type}\ndata: {body}\n\n".encode()


def logged_frame(stream_id: str, event_type: str, data: dict) -> bytes:
    if "type" not in data:
        data = {"type": event_type, **data}
    return encode_frame(event_type, data, stream_id)


class Connection:
    """One open stream: a queue of encoded frames bounded in count and bytes, filled by the hub,
    drained by the response. Frames are the hub's shared bytes objects; only small ones are joined."""

    __slots__ = ("identity", "token_id", "expires_at", "limit", "byte_limit", "frames", "queued_bytes",
                 "wake", "closing", "floor", "task")

    def __init__(self, identity: str, limit: int, byte_limit: int = QUEUE_BYTES,
                 token_id: int | None = None, expires_at=None):
        self.identity = identity
        self.token_id = token_id          # the database token that opened it (TokenGuard)
        self.expires_at = expires_at
        self.limit = limit
        self.byte_limit = byte_limit
        self.frames: deque[tuple[int | None, bytes]] = deque()
        self.queued_bytes = 0
        self.wake = asyncio.Event()
        self.closing: str | None = None   # a key of CLOSING, or "shutdown", once the stream must end
        self.floor = 0                    # live events with id <= floor were already replayed
        self.task: asyncio.Task | None = None

    def offer(self, frame: bytes, event_id: int | None = None) -> bool:
        """Queue a frame. False when the connection overflowed and must be closed."""
        if self.closing:
            return True
        if event_id is not None and event_id <= self.floor:
            return True
        if len(self.frames) >= self.limit or (self.frames and self.queued_bytes + len(frame) > self.byte_limit):
            return False
        self.frames.append((event_id, frame))
        self.queued_bytes += len(frame)
        self.wake.set()
        return True

    def close(self, reason: str) -> None:
        if self.closing is None:
            self.closing = reason
            self.frames.clear()
            self.queued_bytes = 0
        self.wake.set()

    def end(self, reason: str) -> None:
        """End the stream (slow, one too many, token revoked or expired...), and cut it if it cannot
        even take its closing comment."""
        self.close(reason)
        asyncio.get_running_loop().call_later(FORCE_CLOSE_SECONDS, self.force_close)

    async def next_chunk(self) -> bytes | None:
        """The next chunk to write, or None when the stream must end."""
        while True:
            if self.frames:
                chunk = self._take()
                if chunk:
                    return chunk
                continue
            if self.closing:
                return None
            self.wake.clear()
            await self.wake.wait()

    def _take(self) -> bytes:
        """Queued frames up to CHUNK_BYTES: a burst of small frames is joined into one write; a
        large frame goes out as the hub's own bytes object, never copied per connection."""
        parts: list[bytes] = []
        size = 0
        while self.frames:
            event_id, frame = self.frames[0]
            if parts and size + len(frame) > CHUNK_BYTES:
                break
            self.frames.popleft()
            self.queued_bytes -= len(frame)
            if event_id is None or event_id > self.floor:
                parts.append(frame)
                size += len(frame)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def force_close(self) -> None:
        """The response is stuck sending (a client that never reads): cancel it."""
        if self.task is not None and not self.task.done():
            self.task.cancel()


class SSEHub:
    def __init__(self, coord, tokens_guard: TokenGuard, presence: PresenceTracker):
        self.coord = coord
        self.tokens_guard = tokens_guard
        self.presence = presence
        self.queue_size = QUEUE_SIZE
        self.queue_bytes = QUEUE_BYTES
        self.connections: set[Connection] = set()
        self.by_identity: dict[str, dict[Connection, None]] = {}  # oldest first
        self._control_pending = False
        self.slow_closed = 0
        self._cursor = 0
        self._announced = 0
        self._new_events = asyncio.Event()
        self._listener_or_control = asyncio.Event()  # ends an idle gathering (IDLE_GATHER_SECONDS)
        self._after: list[tuple[int, int, Callable[[], None]]] = []  # (upto, order, deliver): after_fanout
        self._after_order = itertools.count()
        self._gaps = GapTracker()
        self._unsubscribe: list = []
        self._open_gauge = process_metrics().sse_streams  # coord_sse_streams, summed over processes
        self.elsewhere = StreamsElsewhere(coord.bus, coord.now, coord.settings.sse_heartbeat_seconds)

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        self._cursor = self._announced = await self.coord.store.read(event_log.latest_id)
        bus = self.coord.bus
        self._unsubscribe = [bus.subscribe(EVENTS, self._on_events),
                             bus.subscribe(EPHEMERAL, self._on_ephemeral),
                             bus.subscribe(STREAM_HINTS, self._on_ephemeral),
                             bus.subscribe(CONTROL, self._on_control),
                             bus.subscribe(BUS, self._on_bus_reconnected)]
        self.elsewhere.start()
        bus.limit_reach(STREAM_HINTS, lambda payload: self.elsewhere.may_hold(payload.get("to")))
        self.coord.spawn(self._pump(), "sse-pump")
        self.coord.spawn(self._heartbeat(), "sse-heartbeat")
        self.coord.spawn(self._prune(), "event-prune")
        self.coord.spawn(self._close_all_on_shutdown(), "sse-shutdown")

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        self.elsewhere.stop()
        self._close_all("shutdown")

    # --- facts for doctor ----------------------------------------------------------------

    @property
    def open_streams(self) -> int:
        return len(self.connections)

    def streams_by_identity(self) -> dict[str, int]:
        return {identity: len(conns) for identity, conns in self.by_identity.items()}

    def has_stream(self, identity: str) -> bool:
        """The one answer to "does this identity have an event stream open here?" (wake pulses,
        presence and doctor ask this; a notebook socket is not a stream)."""
        return identity in self.by_identity

    def streaming_identities(self, everywhere: bool = False) -> frozenset[str]:
        """Identities with a stream open here; `everywhere`: or on another worker process (as it last said)."""
        here = frozenset(self.by_identity)
        return here | self.elsewhere.identities() if everywhere else here

    def stream_count(self, identity: str) -> int:
        return len(self.by_identity.get(identity, ()))

    @property
    def announced(self) -> int:
        """The highest event id this process has heard of (its own commits and, with PostgreSQL, others')."""
        return self._announced

    def after_fanout(self, upto: int, deliver: Callable[[], None]) -> None:
        """Call `deliver` once every logged event up to `upto` has been offered to the streams, so what it
        sends (a wake pulse) follows those events on every stream. While a lower id is still committing
        elsewhere the hub holds the events back; a pulse computed meanwhile is held back with them."""
        if self._cursor >= upto:
            deliver()
        else:
            heapq.heappush(self._after, (upto, next(self._after_order), deliver))

    def _release(self, upto: int | None) -> None:
        """Run the after_fanout callbacks waiting for ids up to `upto` (None: all of them)."""
        while self._after and (upto is None or self._after[0][0] <= upto):
            deliver = heapq.heappop(self._after)[2]
            try:
                deliver()
            except Exception:
                log.exception("a delivery waiting for the event fan-out failed")

    @property
    def lag(self) -> int:
        """Announced event ids not yet fanned out."""
        return max(0, self._announced - self._cursor)

    # --- connections ---------------------------------------------------------------------

    def register(self, principal) -> Connection:
        identity = principal.identity
        conn = Connection(identity, self.queue_size, self.queue_bytes, principal.token_id, principal.expires_at)
        self.connections.add(conn)
        self._open_gauge.inc()
        if identity not in self.by_identity:
            self.elsewhere.opened(identity)
        self.by_identity.setdefault(identity, {})[conn] = None
        if self.coord.shutting_down is not None and self.coord.shutting_down.is_set():
            conn.close("shutdown")
        self._enforce_cap(identity)
        self.tokens_guard.admit(conn)
        self.presence.connection_opened(identity, "sse")
        self.coord.bus.publish(WAKE, {"identity": identity, "reason": "connect"})
        self._listener_or_control.set()
        return conn

    def _enforce_cap(self, identity: str) -> None:
        """Past the per-identity limit, the identity's oldest open streams are closed."""
        live = [c for c in self.by_identity.get(identity, ()) if c.closing is None]
        for conn in live[:max(0, len(live) - self.coord.settings.sse_max_streams_per_identity)]:
            log.info("closing the oldest SSE stream of %s: too many streams", identity)
            conn.end("too_many")

    def unregister(self, conn: Connection) -> None:
        if conn not in self.connections:
            return
        self.connections.discard(conn)
        self._open_gauge.dec()
        peers = self.by_identity.get(conn.identity)
        if peers is not None:
            peers.pop(conn, None)
            if not peers:
                del self.by_identity[conn.identity]
                self.elsewhere.closed(conn.identity)
        self.tokens_guard.release(conn)
        self.presence.connection_closed(conn.identity, "sse")

    def _overflowed(self, conn: Connection) -> None:
        self.slow_closed += 1
        log.info("closing a slow SSE consumer (%s)", conn.identity)
        conn.end("slow")

    def _close_all(self, reason: str) -> None:
        for conn in list(self.connections):
            conn.end(reason)

    async def _close_all_on_shutdown(self) -> None:
        await self.coord.shutting_down.wait()
        self._close_all("shutdown")

    # --- fan-out ---------------------------------------------------------------------------

    def _targets(self, audience) -> list[Connection]:
        """`audience` None = every connection, else identities."""
        if audience is None:
            return list(self.connections)
        return [c for identity in audience for c in self.by_identity.get(identity, ())]

    def _deliver(self, frame: bytes, event_id: int | None, audience) -> None:
        self._offer(frame, event_id, self._targets(audience))

    def _offer(self, frame: bytes, event_id: int | None, targets: list[Connection]) -> None:
        for conn in targets:
            if not conn.offer(frame, event_id):
                self._overflowed(conn)

    def _on_events(self, payload: dict) -> None:
        max_id = payload.get("maxId")
        if isinstance(max_id, int) and max_id > self._announced:
            self._announced = max_id
            self._new_events.set()

    def _on_control(self, _payload: dict) -> None:
        """A control row (a revocation) was committed: read the log even with no stream open."""
        self._control_pending = True
        self._new_events.set()
        self._listener_or_control.set()

    def _on_bus_reconnected(self, _payload: dict) -> None:
        """Announcements made while the bus was down are lost: read the log for whatever is new."""
        self._announced = max(self._announced, self._cursor + 1)
        self._new_events.set()

    def _on_ephemeral(self, payload: dict) -> None:
        event_type, data = payload.get("type"), payload.get("data")
        if not isinstance(event_type, str) or not isinstance(data, dict):
            return
        to = payload.get("to")
        targets = self._targets(None if to is None else list(to))
        if targets:  # most inbox_check and presence events have no listener: skip encoding them
            self._offer(encode_frame(event_type, data), None, targets)

    async def _pump(self) -> None:
        """Reads each new log row once, in id order, and fans it out."""
        while True:
            await self._new_events.wait()
            await self._gather_while_idle()
            self._new_events.clear()
            try:
                await self._drain_log()
            except Exception:
                log_background_failure(log, "reading the event log for SSE failed; retrying")
                await asyncio.sleep(0.5)
                self._new_events.set()

    async def _caught_up(self) -> None:
        """Before a stream registers: wait (at most CATCH_UP_SECONDS) until the hub has read every row announced
        so far, so that a stream starts live where the log stood when it opened, as with a hub that never
        gathers; what the hub reads later (an id still committing, a row committed since) reaches the stream."""
        target = self._announced
        if self._cursor >= target:
            return
        self._listener_or_control.set()
        read: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done() -> None:
            if not read.done():  # cancelled once the wait below gave up
                read.set_result(None)
        self.after_fanout(target, done)
        try:
            await asyncio.wait_for(read, CATCH_UP_SECONDS)
        except TimeoutError:
            pass  # a lower id is still committing elsewhere (or the database is away): open anyway

    async def _gather_while_idle(self) -> None:
        """PostgreSQL, no stream open here, no control row: wait for more announcements before reading.
        (SQLite skips the read altogether then: see _drain_log.)"""
        self._listener_or_control.clear()
        if self.connections or self._control_pending or self.coord.store.sqlite:
            return
        try:
            await asyncio.wait_for(self._listener_or_control.wait(), IDLE_GATHER_SECONDS)
        except TimeoutError:
            pass

    async def _drain_log(self) -> None:
        control, self._control_pending = self._control_pending, False
        while self._cursor < self._announced or self._gaps.waiting():
            if not self.connections and self.coord.store.sqlite and not control:
                # Nobody to fan out to: skip the read (bench/RESULTS.md, "Figures from code
                # comments"). Safe on SQLite only: its one writer commits ids
                # in order, so every announced id is already visible and a stream opened later
                # replays it from the log. PostgreSQL writers may still be committing a lower id.
                self._cursor = self._announced
                self._gaps = GapTracker()
                self._release(None)
                return
            cursor, full = self._cursor, bool(self.connections)
            if full:
                read_rows = partial(event_log.range_after, cursor, None, READ_BATCH, tagged=True)
            else:  # nobody listening: only move past the rows (and act on control rows), one small query
                read_rows = partial(event_log.heads_after, cursor, CONTROL_TYPES, READ_BATCH)
            rows, usable = await self.coord.store.read(self._gaps.read, cursor, read_rows)
            if self.connections and not full:
                continue  # a stream opened during the read: read these rows again, in full
            for event_id, event_type, data, to_all, audience, stream_id in rows[:usable]:
                if event_type in CONTROL_TYPES:
                    self.tokens_guard.on_logged(event_type, data)
                targets = self._targets(None if to_all else audience)
                if targets:
                    self._offer(logged_frame(stream_id, event_type, data), event_id, targets)
                self._cursor = event_id
            self._release(self._cursor)
            self._gaps.forget_below(self._cursor)
            if rows:
                # A full batch may not be the end: keep reading past it.
                self._announced = max(self._announced, rows[-1][0] + (len(rows) == READ_BATCH))
            if usable < len(rows) or (not rows and self._gaps.waiting()):
                await asyncio.sleep(0.02)  # a lower id is still committing elsewhere
            elif not rows:
                self._announced = self._cursor
                self._release(None)  # nothing announced is left to read
                return

    async def _heartbeat(self) -> None:
        presence = self.presence
        while True:
            await asyncio.sleep(self.coord.settings.sse_heartbeat_seconds)
            for identity in list(self.by_identity):
                presence.touch(identity, "sse")
            self.elsewhere.refresh(self.by_identity)
            self._deliver(HEARTBEAT, None, None)

    async def _prune(self) -> None:
        retention = timedelta(days=self.coord.settings.event_retention_days)
        while True:
            try:
                removed = await self.coord.store.write_until_done(event_log.prune, retention)
                if removed:
                    log.info("pruned %d events older than %s", removed, retention)
            except Exception:
                log_background_failure(log, "pruning the event log failed")
            await asyncio.sleep(PRUNE_INTERVAL_SECONDS)

    # --- one stream ------------------------------------------------------------------------

    async def open(self, principal, resume_after: int | None, resume_tag: str | None = None):
        """The body of one `GET /api/stream` response (an async generator of frames), with its first
        frame already made: the stream is registered and the log's bounds read before any answer is
        sent, so a database that cannot answer is the request's 503, not a 200 that ends at once. If the
        body is then never read, finalising it unregisters the stream (it has started, unlike a fresh
        generator, whose `finally` would never run). `resume_tag`: the tag of the client's Last-Event-ID,
        checked against the log's row of that id."""
        frames = self._stream(principal, resume_after, resume_tag)
        first = await frames.__anext__()
        return _prepend(first, frames)

    async def _stream(self, principal, resume_after: int | None, resume_tag: str | None):
        await self._caught_up()
        conn = self.register(principal)
        conn.task = asyncio.current_task()
        try:
            bounds = await self.coord.store.read(_log_bounds, resume_after if resume_tag else None)
            yield encode_frame("connected", {"identity": principal.identity, "lastEventId": bounds.latest,
                                             "resumeFrom": bounds.resume_from})
            if resume_after is not None:
                resync = _resync_reason(resume_after, resume_tag, bounds)
                if resync is not None:
                    yield encode_frame("resync", {"type": "resync", "reason": resync, "oldestEventId": bounds.oldest})
                else:
                    try:
                        async for frame in self._replay(conn, resume_after):
                            yield frame
                    except DatabaseFault:
                        # The replay met an outage after the answer began: end here; the client resumes
                        # from the last id it received (Last-Event-ID) once the database answers again.
                        yield DATABASE_CLOSING
                        return
            while True:
                chunk = await conn.next_chunk()
                if chunk is None:
                    break
                yield chunk
            if conn.closing in CLOSING:
                yield CLOSING[conn.closing]
        finally:
            self.unregister(conn)

    async def _replay(self, conn: Connection, after_id: int):
        """Logged events for this identity after `after_id`, up to where the hub has fanned out.

        The connection is registered first, so everything the hub fans out from then on reaches its
        queue. The replay stops at the hub's position (taken now): later events arrive live, in the
        hub's order, which waits out ids still committing; `floor` drops live copies of replayed ones."""
        upto, resume_point = self._cursor, after_id
        while after_id < upto:
            rows = await self.coord.store.read(event_log.for_identity_after, conn.identity, after_id, READ_BATCH,
                                               True)
            wanted = [row for row in rows if row[0] <= upto]
            for event_id, event_type, data, stream_id in wanted:
                yield logged_frame(stream_id, event_type, data)
                after_id = event_id
            if len(wanted) < READ_BATCH:
                break
        conn.floor = max(upto, resume_point)


async def _prepend(first: bytes, frames):
    try:
        yield first
        async for frame in frames:
            yield frame
    finally:
        await frames.aclose()  # at once, as the response closes it (the stream unregisters)


class LogBounds(NamedTuple):
    latest: int
    oldest: int | None
    resume_from: str        # the newest event's stream id: a new client's resume point
    tag: str | None         # the tag of the row a tagged resume point names (None: no such row)


def _resync_reason(resume_after: int, resume_tag: str | None, bounds: LogBounds) -> str | None:
    """Why a resume point cannot be replayed: beyond the log's newest id ("ahead": the database was
    restored or replaced), older than the log keeps ("expired"), or a tagged id whose row is another
    event or none ("restored": the log was restored from a backup and reuses ids), else None."""
    if resume_after > bounds.latest:
        return "ahead"
    if bounds.oldest is not None and resume_after < bounds.oldest - 1:
        return "expired"
    if resume_tag is not None and bounds.tag != resume_tag:
        return "expired" if bounds.tag is None and resume_after < (bounds.oldest or 0) else "restored"
    return None


def _log_bounds(tagged_resume: int | None = None) -> LogBounds:
    tag = event_log.tag_of(tagged_resume) if tagged_resume is not None else None
    latest, resume_from = event_log.head()
    return LogBounds(latest, event_log.oldest_id(), resume_from, tag)
