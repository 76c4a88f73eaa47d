"""HTTP/1.1 for Hypercorn, parsed by httptools (llhttp, in C) instead of h11 (pure Python).

Hypercorn's HTTP/1 protocol runs every request and every response through h11, which parses, builds and checks
each head in Python: on a loaded server that was most of a send's cost and almost all of the health route's
(bench/RESULTS.md, 2026-11-28). Hypercorn has no other HTTP/1 parser and no way to name one, so
`Http1Protocol` takes the place of its `H11Protocol` (same constructor, same `handle` and `stream_send`) and
everything else stays Hypercorn's: the HTTP and WebSocket streams, the ASGI calls, keep-alive and idle
timeouts, graceful shutdown, HTTP/2 (over TLS, by prior knowledge or by an h2c upgrade). The one exception is the
direct lane: a request to a hot route (hotpaths.py) is answered without Hypercorn's ASGI stream (`_LaneStream`).

What goes on the wire is what h11 wrote, byte for byte (tests/server/test_http1.py replays the same requests
against both): a status line without a reason phrase, the app's headers in order, then h11's framing rules -
`Transfer-Encoding: chunked` for a body of unknown length to an HTTP/1.1 client, a connection closed after it for
HTTP/1.0, `Connection: close` when the request ends keep-alive. A request h11 refused is refused alike (400; 431
for an unfinished head over `h11_max_incomplete_size`; 501 for a transfer coding other than chunked), and the
connection closes after it. A chunked body's trailers are dropped, as h11 dropped them.

Where llhttp is stricter than h11 it stays so (each case tested): a 400 for a folded header, a bare LF, a
lowercase or unknown method, a version other than 1.0 and 1.1, a control character in a header, and both
Content-Length and chunked (a request-smuggling vector h11 let through). What follows a request with
`Connection: close` is not read (h11 read on and answered 400 in place of that request's response). An answer
given before its request's body was read (a 413) says `Connection: close` (h11 closed without saying so, and a
client that reused the connection lost its next request), and closes the connection only once the rest of that
body has been read and dropped, or after LINGER_SECONDS: h11 closed at once, and a socket closed with unread data
is reset by the kernel, which could destroy the answer before the client read it.
"""
from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from itertools import chain
from types import SimpleNamespace
from time import perf_counter
from typing import Any, Protocol, cast
from urllib.parse import unquote

import httptools
from hypercorn.config import Config
from hypercorn.asyncio import tcp_server
from hypercorn.events import Closed, Event, RawData, Updated
from hypercorn.protocol import ProtocolWrapper
from hypercorn.protocol.events import (
    Body,
    Data,
    EndBody,
    EndData,
    Event as StreamEvent,
    InformationalResponse,
    Request,
    Response,
    StreamClosed,
)
from hypercorn.protocol.h11 import H2CProtocolRequiredError, H2ProtocolAssumedError, H11Protocol
from hypercorn.protocol.http_stream import HTTPStream
from hypercorn.protocol.ws_stream import WSStream
from hypercorn.typing import AppWrapper, ConnectionState, TaskGroup, WorkerContext
from hypercorn.utils import suppress_body

STREAM_ID = 1
Headers = list[tuple[bytes, bytes]]
_PRIOR_KNOWLEDGE = b"PRI * HTTP/2.0\r\n\r\n"
# How long an answered connection is kept reading the rest of a request body it will not use (see _linger).
LINGER_SECONDS = 2.0
# h11's rules for the headers of a response: a name is a token; a value has no NUL, no line break and no
# whitespace at either end.
_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_FIELD_VALUE = re.compile(rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")


class LocalProtocolError(Exception):
    """The app asked for a response HTTP/1.1 cannot carry (where h11 raised its own LocalProtocolError)."""


@dataclass(slots=True)
class _Exchange:
    """One request and the rules it sets for its response, read when its head is complete. Pipelined
    requests are parsed before the response ahead of them is done, so this travels with its request."""

    request: Request
    method: bytes
    http11: bool
    keep_alive: bool
    upgrade: bytes  # the Upgrade header's value, lowercased
    has_body: bool
    expect_continue: bool
    upgraded: bool = False  # the parser stopped after this head: what follows is not HTTP/1

    def takes_upgrade(self) -> bool:
        """The upgrades Hypercorn takes over HTTP/1.1: a WebSocket handshake, and h2c without a body."""
        return ((self.upgrade == b"websocket" and self.method == b"GET")
                or (self.upgrade == b"h2c" and not self.has_body))


class _NotImplementedCoding(Exception):
    """A transfer coding other than chunked (gzip, deflate): h11 answered 501 Not Implemented."""


@dataclass(slots=True)
class _Refusal:
    status: int


@dataclass(slots=True)
class _Tail:
    """Bytes after an upgrade's head: the new protocol's."""

    data: bytes


class DirectLane(Protocol):
    """Routes answered without Hypercorn's ASGI stream (hotpaths.HotPaths is the one): `route` picks a request
    by the few scope keys it reads (method, path, query_string, headers, client) and `answer` gives its whole
    answer once the body is read."""

    def route(self, scope: dict[str, Any]) -> Any | None: ...

    async def answer(self, found: Any, scope: dict[str, Any], body: bytes,
                     started: float) -> tuple[int, Headers, bytes]: ...


class _LaneStream:
    """A request the direct lane took, in the place of Hypercorn's HTTPStream. HTTPStream builds a full ASGI
    scope, starts the app in a task fed by a queue, and turns the app's messages back into events; for the
    hot routes that was a fifth of a send's GIL time (bench/RESULTS.md). This gathers the body and, at its
    end, runs the lane's answer in a task of the connection's task group, handing the protocol the events
    HTTPStream would have handed it, in the same order."""

    __slots__ = ("_protocol", "_lane", "_found", "_scope", "_body", "_started")

    def __init__(self, protocol: Http1Protocol, lane: DirectLane, found: Any, scope: dict[str, Any]) -> None:
        self._protocol = protocol
        self._lane = lane
        self._found = found
        self._scope = scope
        self._body: list[bytes] = []
        self._started = perf_counter()

    async def handle(self, event: Event | StreamEvent) -> None:
        if isinstance(event, Body):
            self._body.append(bytes(event.data))
        elif isinstance(event, EndBody):
            self._protocol.task_group.spawn(self._answer)
        # a StreamClosed before EndBody: the client went away mid-request, and nothing is answered (as the hot
        # paths did on http.disconnect); after it, the answer still goes out, as HTTPStream's did

    async def _answer(self) -> None:
        protocol = self._protocol
        method = self._scope["method"]
        try:
            status, headers, payload = await self._lane.answer(self._found, self._scope, b"".join(self._body),
                                                               self._started)
        except Exception:  # a bug: answered as Hypercorn answers an app that failed before its response
            await protocol.config.log.exception("Error in ASGI Framework")
            status, headers, payload = 500, [(b"content-length", b"0"), (b"connection", b"close")], b""
        await protocol.stream_send(Response(stream_id=STREAM_ID, headers=headers, status_code=status))
        if payload and not suppress_body(method, status):
            await protocol.stream_send(Body(stream_id=STREAM_ID, data=payload))
        await protocol.stream_send(EndBody(stream_id=STREAM_ID))
        await protocol.stream_send(StreamClosed(stream_id=STREAM_ID))


class Http1Protocol:
    """Hypercorn's HTTP/1.1 connection protocol on httptools. One request at a time: a pipelined request waits,
    parsed, until the response before it is complete, as it did in h11."""

    def __init__(
        self,
        app: AppWrapper,
        config: Config,
        context: WorkerContext,
        task_group: TaskGroup,
        connection_state: ConnectionState,
        ssl: bool,
        client: tuple[str, int] | None,
        server: tuple[str, int] | None,
        send: Callable[[Event], Awaitable[None]],
    ) -> None:
        self.config = config
        self.context = context
        self.connection_state = connection_state
        self.send = send
        self._stream_args = (app, config, context, task_group, ssl, client, server)  # what a stream is made of
        self.task_group = task_group
        self._client = client
        self._loop = asyncio.get_running_loop()
        self._lane = _direct_lane(config)
        self.stream: HTTPStream | WSStream | _LaneStream | None = None
        self.can_read = context.event_class()
        self.keep_alive_requests = 0
        self._parser = httptools.HttpRequestParser(self)
        self._parsed: deque[_Exchange | Body | EndBody | _Refusal | _Tail] = deque()
        self._preface: bytes | None = b""  # the first bytes, while they may be HTTP/2's preface
        self._max_head = config.h11_max_incomplete_size
        self._target = b""
        self._headers: Headers = []
        self._head_fed = 0
        self._in_head = False
        self._upgraded = False  # the parser stopped at an upgrade's head: it reads nothing more
        self._app_headers: Headers | None = None  # a request read again without its upgrade: its own headers
        self._websocket = False
        self._closing = False
        # The exchange being answered, and its response's body framing: "chunked", "length" or "close".
        self._exchange: _Exchange | None = None
        self._request_done = False
        self._framing = ""
        self._remaining = 0
        self._response_done = False
        # Keep-alive between requests (see _busy): the idle gap's timer, and the task that ends an idle
        # connection when the server stops.
        self._owns_idleness = False
        self._idle_timer: asyncio.TimerHandle | None = None
        self._stop_watch: asyncio.Task | None = None
        self._closer: asyncio.Task | None = None
        self._held_head: bytes | None = None  # see _hold_head
        self._head_flush: asyncio.Task | None = None
        self._linger_timer: asyncio.TimerHandle | None = None  # see _linger

    async def initiate(self) -> None:
        pass

    async def handle(self, event: Event) -> None:
        if isinstance(event, RawData):
            if self._websocket:
                if self.stream is not None:
                    await self.stream.handle(Data(stream_id=STREAM_ID, data=event.data))
            elif not self._upgraded:
                await self._receive(event.data)
        elif isinstance(event, Closed):
            self._closing = True
            self._stop_idle_timing()
            self._stop_lingering()
            await self.can_read.set()
            if self.stream is not None:
                await self._close_stream()

    # --- reading -------------------------------------------------------------------------------------------

    async def _receive(self, data: bytes) -> None:
        if self._preface is not None:
            data = self._preface + data
            if data.startswith(_PRIOR_KNOWLEDGE):
                raise H2ProtocolAssumedError(data)  # HTTP/2 with prior knowledge: Hypercorn switches
            if _PRIOR_KNOWLEDGE.startswith(data):
                self._preface = data
                return
            self._preface = None
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            rest = data[upgrade.args[0]:]
            exchange = next((item for item in reversed(self._parsed) if isinstance(item, _Exchange)), None)
            if exchange is not None and not exchange.takes_upgrade() and exchange.method != b"CONNECT":
                await self._read_on_without_upgrade(exchange, rest)
                return
            self._upgraded = True
            if exchange is not None:
                exchange.upgraded = True
            self._parsed.append(_Tail(rest))
        except httptools.HttpParserError as error:
            self._parsed.append(_Refusal(501 if isinstance(error.__context__, _NotImplementedCoding) else 400))
        else:
            if self._in_head:  # h11 held an unfinished head up to this limit
                self._head_fed += len(data)
                if self._head_fed > self._max_head:
                    self._parsed.append(_Refusal(431))
        await self._dispatch()

    async def _read_on_without_upgrade(self, exchange: _Exchange, rest: bytes) -> None:
        """An upgrade nobody takes (h2c with a body, an unknown protocol): llhttp stopped at its head, as it
        does for every upgrade, where h11 read on and answered it in HTTP/1.1. A fresh parser reads it again
        from a head without the upgrade; the app still sees the request's own headers."""
        while self._parsed[-1] is not exchange:
            self._parsed.pop()  # llhttp's end of a message it took to have no body
        self._parsed.pop()
        self._parser = httptools.HttpRequestParser(self)
        self._app_headers = exchange.request.headers
        await self._receive(_head_without_upgrade(exchange) + rest)

    async def _dispatch(self) -> None:
        while self._parsed:
            item = self._parsed.popleft()
            if self._linger_timer is not None:  # the rest of an answered request's body: read, and dropped
                if not isinstance(item, Body):  # its end, or what cannot be read as it
                    self._parsed.clear()
                    self._stop_lingering()
                    await self.send(Closed())
                continue
            if isinstance(item, _Refusal) and self.stream is not None and not self._request_done:
                await self._refuse(item.status)  # the body being read is malformed
                return
            if isinstance(item, (_Exchange, _Refusal)):
                if self.stream is not None:  # pipelined: wait until the response before it is done
                    await self.can_read.clear()
                    await self.can_read.wait()
                if self._closing:
                    self._parsed.clear()
                    return
                if isinstance(item, _Refusal):
                    await self._refuse(item.status)
                    return
                await self._start(item)
            elif isinstance(item, _Tail):
                if self._websocket and self.stream is not None and item.data:
                    await self.stream.handle(Data(stream_id=STREAM_ID, data=item.data))
            elif self.stream is not None and not self._websocket:
                if isinstance(item, EndBody):
                    self._request_done = True
                await self.stream.handle(item)

    async def _start(self, exchange: _Exchange) -> None:
        if exchange.upgrade == b"h2c" and not exchange.has_body and exchange.upgraded:
            self._stop_idle_timing()  # HTTP/2 takes the connection, and times it with Hypercorn's own task
            await self._write_head(101, [*self.config.response_headers("h11"), (b"connection", b"upgrade"),
                                         (b"upgrade", b"h2c")])
            tail = b"".join(item.data for item in self._parsed if isinstance(item, _Tail))
            request = exchange.request
            h11_request = SimpleNamespace(  # what Hypercorn reads of h11's Request
                method=exchange.method, target=request.raw_path, headers=request.headers)
            raise H2CProtocolRequiredError(tail, cast(Any, h11_request))
        await self._busy()
        self._exchange = exchange
        self._request_done = False
        self._response_done = False
        self._framing = ""
        if exchange.upgraded:
            if exchange.takes_upgrade():  # a WebSocket handshake (bodiless h2c left above)
                self._websocket = True
            else:  # CONNECT: llhttp reads nothing after its head; answer it (405) and close
                exchange.keep_alive = False
                if exchange.has_body:
                    await self._refuse(400)
                    return
        self.stream = self._lane_stream(exchange)
        if self.stream is None:
            stream_class = WSStream if self._websocket else HTTPStream
            self.stream = stream_class(*self._stream_args, self.stream_send, STREAM_ID)
            await self.stream.handle(exchange.request)
        self.keep_alive_requests += 1
        await self.context.mark_request()
        if exchange.expect_continue and self.stream is not None:
            await self._write_head(100, self.config.response_headers("h11"))

    def _lane_stream(self, exchange: _Exchange) -> _LaneStream | None:
        """A stream of the direct lane, when the lane takes this request; None leaves it to Hypercorn's."""
        lane = self._lane
        if lane is None or self._websocket or exchange.upgraded:
            return None
        request = exchange.request
        path, _, query_string = request.raw_path.partition(b"?")
        try:
            scope = {"type": "http", "method": request.method, "path": unquote(path.decode("ascii")),
                     "query_string": query_string, "headers": request.headers, "client": self._client}
        except UnicodeDecodeError:  # Hypercorn's stream fails alike on such a path
            return None
        found = lane.route(scope)
        return None if found is None else _LaneStream(self, lane, found, scope)

    # httptools' callbacks. They only gather (they cannot await); _dispatch does the work.

    def on_message_begin(self) -> None:
        self._target = b""
        self._headers = []
        self._head_fed = 0
        self._in_head = True

    def on_url(self, url: bytes) -> None:
        self._target += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value.rstrip(b" \t")))  # llhttp drops the leading whitespace

    def on_headers_complete(self) -> None:
        self._in_head = False
        parser = self._parser
        version = parser.get_http_version()
        http11 = version == "1.1"
        method = parser.get_method()
        headers = self._app_headers or self._headers
        self._app_headers = None
        self._headers = []  # a chunked body's trailers land here, unread (h11 dropped them too)
        connection: list[bytes] = []
        transfer_codings: list[bytes] = []
        upgrade = b""
        expect: list[bytes] = []
        hosts = 0
        has_body = False
        for name, value in headers:
            if name == b"host":
                hosts += 1
            elif name == b"connection":
                connection += _comma_values(value)
            elif name == b"upgrade":
                upgrade = value.strip().lower()
            elif name == b"expect":
                expect += _comma_values(value)
            elif name == b"content-length":
                has_body = True
            elif name == b"transfer-encoding":
                has_body = True
                transfer_codings += _comma_values(value)
        if version != "1.1" and version != "1.0":  # llhttp reads 2.0 too; HTTP/2 is Hypercorn's other protocol
            raise httptools.HttpParserError(f"HTTP/{version} in an HTTP/1 request")
        if transfer_codings and transfer_codings != [b"chunked"]:
            raise _NotImplementedCoding  # as h11: 501
        if hosts > 1 or (http11 and hosts == 0):
            raise httptools.HttpParserError("a request needs exactly one Host header")  # as h11
        request = Request(stream_id=STREAM_ID, headers=headers, http_version=version,
                          method=method.decode("ascii").upper(), raw_path=self._target,
                          state=self.connection_state)
        self._parsed.append(_Exchange(request, method, http11, http11 and b"close" not in connection, upgrade,
                                      has_body, http11 and b"100-continue" in expect))

    def on_body(self, body: bytes) -> None:
        self._parsed.append(Body(stream_id=STREAM_ID, data=body))

    def on_message_complete(self) -> None:
        self._parsed.append(EndBody(stream_id=STREAM_ID))

    # --- writing -------------------------------------------------------------------------------------------

    async def stream_send(self, event: StreamEvent) -> None:
        if isinstance(event, Response):
            headers = list(chain(event.headers, self.config.response_headers("h11")))
            if event.status_code < 200:
                await self._write_head(event.status_code, headers)
                return
            if self.keep_alive_requests >= self.config.keep_alive_max_requests:
                headers.append((b"connection", b"close"))
            exchange = self._exchange
            if exchange is not None and exchange.has_body and not exchange.upgraded and not self._request_done:
                exchange.keep_alive = False  # answered before its body was read: it closes after (see _linger)
            head = self._response_head(event.status_code, headers)
            if self._framing == "length" and self._remaining > 0:
                self._hold_head(head)
            else:
                await self.send(RawData(data=head))
        elif isinstance(event, Body):
            await self._write(self._frame(event.data))
        elif isinstance(event, EndBody):
            await self._write(self._end_body())
        elif isinstance(event, Data):  # WebSocket frames
            await self.send(RawData(data=event.data))
        elif isinstance(event, StreamClosed):
            await self._maybe_recycle()
        elif not isinstance(event, (InformationalResponse, EndData)):  # early hints are HTTP/2 only
            raise LocalProtocolError(f"unexpected {type(event).__name__}")

    async def _write(self, data: bytes) -> None:
        if self._held_head is not None:
            data = self._held_head + data
            self._held_head = None
        if data:
            await self.send(RawData(data=data))

    # A response head goes out with the start of its body, in one write: on this VM a loopback write costs a
    # send about 40 µs of the GIL. Hypercorn hands over the head at `http.response.start`; the app's first
    # body normally follows in the same step of its task, and if it does not, the next turn of the loop
    # writes the head alone.

    def _hold_head(self, head: bytes) -> None:
        self._held_head = head
        self._loop.call_soon(self._head_not_followed)

    def _head_not_followed(self) -> None:
        if self._held_head is not None:
            self._head_flush = self._loop.create_task(self._write(b""))

    def _response_head(self, status: int, headers: Headers) -> bytes:
        """The head h11 wrote for this response; sets the framing of the body after it."""
        exchange = self._exchange
        method = exchange.method if exchange is not None else b"GET"
        http11 = exchange.http11 if exchange is not None else False
        keep_alive = exchange.keep_alive if exchange is not None else True
        content_length: bytes | None = None
        chunked = False
        closes = False
        for name, value in headers:
            lowered = name.lower()
            if lowered == b"content-length":
                if not value.isdigit():
                    raise LocalProtocolError("bad Content-Length")
                content_length = value
            elif lowered == b"transfer-encoding":
                chunked = True
            elif lowered == b"connection" and b"close" in _comma_values(value):
                closes = True
        unknown_length = not (status in (204, 304) or (method == b"CONNECT" and 200 <= status < 300)) and (
            chunked or content_length is None)
        need_close = False
        if unknown_length:
            headers = _without(headers, b"content-length")
            headers = _without(headers, b"transfer-encoding")
            if http11:
                headers.append((b"Transfer-Encoding", b"chunked"))
                self._framing = "chunked"
            else:
                self._framing = "close"
                need_close = method != b"HEAD"
        else:
            self._framing = "length"
            self._remaining = 0 if content_length is None or status in (204, 304) else int(content_length)
        if method == b"HEAD":
            self._framing = "length"
            self._remaining = 0
        if not keep_alive or need_close:
            tokens = {token for name, value in headers if name.lower() == b"connection"
                      for token in _comma_values(value)}
            tokens.discard(b"keep-alive")
            tokens.add(b"close")
            headers = _without(headers, b"connection")
            headers.extend((b"Connection", token) for token in sorted(tokens))
        if exchange is not None and (closes or need_close):
            exchange.keep_alive = False
        return _head(status, headers)

    async def _write_head(self, status: int, headers: Headers) -> None:
        await self.send(RawData(data=_head(status, headers)))

    def _frame(self, data: bytes) -> bytes:
        if self._framing == "chunked":
            return b"%x\r\n%s\r\n" % (len(data), data) if data else b""
        if self._framing == "length":
            self._remaining -= len(data)
            if self._remaining < 0:
                raise LocalProtocolError("Too much data for declared Content-Length")
        return data

    def _end_body(self) -> bytes:
        self._response_done = True
        if self._framing == "chunked":
            return b"0\r\n\r\n"
        if self._framing == "length" and self._remaining != 0:
            raise LocalProtocolError("Too little data for declared Content-Length")
        return b""

    async def _refuse(self, status: int) -> None:
        """h11's answer to a request it could not read (unless a response to it has begun); the connection
        closes after it."""
        self._closing = True
        self._parsed.clear()
        if self._framing == "":
            self._exchange = None
            headers = [(b"content-length", b"0"), (b"connection", b"close"),
                       *self.config.response_headers("h11")]
            await self.send(RawData(data=self._response_head(status, headers)))
        await self._write(b"")  # a head held for the body being refused, as it was
        await self.send(Closed())

    async def _maybe_recycle(self) -> None:
        await self._close_stream()
        exchange = self._exchange
        if (not self.context.terminated.is_set() and not self._websocket and not self._closing
                and exchange is not None and exchange.keep_alive and self._response_done
                and self._request_done):
            self._exchange = None
            self._framing = ""
            await self.can_read.set()
            self._idle()
        else:
            self._closing = True
            await self.can_read.set()
            await self._write(b"")  # a head held for a body that never came, as it was
            if self._linger(exchange):
                return
            await self.send(Closed())

    # The app answered before reading the whole request body (a 413 for a body over the limit, a refusal
    # that needs none of it) and the connection closes after that answer. Closing a socket with unread data
    # makes the kernel send a reset, which can destroy the answer before the client has read it: a client
    # still sending its body got "connection reset" instead of the 413. So the connection first reads the
    # rest of that body and drops it, and closes at its end, or after LINGER_SECONDS, whichever comes first.

    def _linger(self, exchange: _Exchange | None) -> bool:
        if (exchange is None or self._request_done or not self._response_done or self._websocket or self._upgraded
                or self.context.terminated.is_set()):
            return False
        self._linger_timer = self._loop.call_later(LINGER_SECONDS, self._linger_expired)
        return True

    def _linger_expired(self) -> None:
        self._linger_timer = None
        self._close_soon()

    def _stop_lingering(self) -> None:
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None

    async def _close_stream(self) -> None:
        if self.stream is not None:
            await self.stream.handle(StreamClosed(stream_id=STREAM_ID))
            self.stream = None

    # --- keep-alive ----------------------------------------------------------------------------------------
    # Hypercorn's TCP server times a connection's idle gaps with a task it cancels before every request and
    # starts again after it: on a loaded server 7 % of a send's GIL time, and a trip through the loop before
    # the request may begin. Its task times the wait for the first request; the first request stops it for
    # good, and from then on the gaps are timed here with a timer handle. Their rules stay Hypercorn's: an idle
    # connection closes after keep_alive_timeout, or at once when the server stops; a busy one is never timed.

    async def _busy(self) -> None:
        if self._idle_timer is not None:
            self._cancel_idle_timer()
        elif not self._owns_idleness:
            self._owns_idleness = True
            await self.send(Updated(idle=False))

    def _idle(self) -> None:
        self._idle_timer = self._loop.call_later(self.config.keep_alive_timeout, self._idle_expired)
        if self._stop_watch is None:
            self._stop_watch = self._loop.create_task(self._close_idle_at_stop())

    def _idle_expired(self) -> None:
        self._idle_timer = None
        self._closing = True  # a request arriving from now on is not read
        self._close_soon()

    def _close_soon(self) -> None:
        """Close from a timer's callback, which cannot await."""
        self._closer = self._loop.create_task(self._close())

    async def _close(self) -> None:
        await self.send(Closed())

    async def _close_idle_at_stop(self) -> None:
        await self.context.terminated.wait()
        self._stop_watch = None
        if self._idle_timer is not None:  # idle: closes now (a busy one after its response: _maybe_recycle)
            self._cancel_idle_timer()
            self._idle_expired()

    def _cancel_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _stop_idle_timing(self) -> None:
        self._cancel_idle_timer()
        if self._stop_watch is not None:
            self._stop_watch.cancel()
            self._stop_watch = None


def _head_without_upgrade(exchange: _Exchange) -> bytes:
    """The request's head for llhttp again, with `upgrade` taken out of its Connection header."""
    request = exchange.request
    lines = [b"%s %s HTTP/%s" % (exchange.method, request.raw_path, request.http_version.encode("ascii"))]
    for name, value in request.headers:
        if name == b"connection":
            value = b",".join(token for token in value.split(b",") if token.strip().lower() != b"upgrade")
            if not value.strip():
                continue
        lines.append(b"%s: %s" % (name, value))
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _head(status: int, headers: Headers) -> bytes:
    """A response head as h11 wrote it, refusing the headers h11 refused."""
    for name, value in headers:
        if not _TOKEN.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            raise LocalProtocolError(f"illegal header {name!r}")
    return b"".join(chain((b"HTTP/1.1 %d \r\n" % status,),
                          (b"%s: %s\r\n" % (name, value) for name, value in headers), (b"\r\n",)))


def _without(headers: Headers, lowered_name: bytes) -> Headers:
    return [(name, value) for name, value in headers if name.lower() != lowered_name]


def _direct_lane(config: Config) -> DirectLane | None:
    """The config's direct lane (`CoordConfig.direct_lane`), unless requests must go through Hypercorn's stream:
    for its access log, or its check of the Host header against `server_names`."""
    lane = getattr(config, "direct_lane", None)
    if lane is None or config.accesslog is not None or config.server_names:
        return None
    return cast(DirectLane, lane)


def _comma_values(value: bytes) -> list[bytes]:
    return [token for token in (part.strip() for part in value.lower().split(b",")) if token]


class CoordProtocolWrapper(ProtocolWrapper):
    """Hypercorn's protocol choice, with `Http1Protocol` for HTTP/1.1 when the config asks for it
    (`config.http1_httptools`, CoordConfig's default; COORD_HTTPTOOLS=off clears it); HTTP/2 stays Hypercorn's."""

    def __init__(self, app: AppWrapper, config: Config, context: WorkerContext, task_group: TaskGroup,
                 state: ConnectionState, ssl: bool, client: tuple[str, int] | None,
                 server: tuple[str, int] | None, send: Callable[[Event], Awaitable[None]],
                 alpn_protocol: str | None = None) -> None:
        super().__init__(app, config, context, task_group, state, ssl, client, server, send, alpn_protocol)
        if isinstance(self.protocol, H11Protocol) and getattr(config, "http1_httptools", False):
            http1 = Http1Protocol(app, config, context, task_group, state, ssl, client, server, send)
            self.protocol = cast(H11Protocol, http1)  # the same three methods ProtocolWrapper calls


def install() -> None:
    """Make Hypercorn's asyncio TCP server build its connections' protocols with CoordProtocolWrapper. It
    names ProtocolWrapper once, at import (hypercorn 0.18, pinned); a config without `http1_httptools` keeps h11."""
    tcp_server.ProtocolWrapper = CoordProtocolWrapper  # type: ignore[misc]
