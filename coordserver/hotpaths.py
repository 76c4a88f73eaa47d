"""The hottest routes (send, inbox, the caller's wake, ingest) and the floor (health), served straight from
ASGI in front of Quart.

Agents send mail, list their inbox and ask what is waiting far more than they do anything else, and on those routes
Quart's per-request machinery (request and app contexts, URL adapter, hook chains, Response objects)
cost more than the work itself (bench/messages.md, round 3). Here they skip it.

Over HTTP/1.1 they skip ASGI too: http1.py's direct lane calls `route` and `answer` itself, without Hypercorn's
ASGI stream; over HTTP/2, h11 (COORD_HTTPTOOLS=off) or an access-logging server they are reached as ASGI middleware.

Only the transport differs. Admission is the same Gate the Quart hook uses; parsing and the domain
calls are the same functions the Quart views call (api/messages.py post_message / inbox_json, api/meta.py
health_json, api/buzz.py ingest_answer); errors are
rendered by the same function (errors.render_error). Anything this layer does not take whole - another method or path, a body
without Content-Length (chunked) or over the size limit, a query string that is not UTF-8 - goes to
Quart untouched, before a byte of it was read. COORD_HOT_PATHS=off sends everything to Quart, and
tests/server/api/test_hotpaths.py checks both paths answer alike.
"""
from __future__ import annotations

from functools import lru_cache
from time import perf_counter
from typing import Awaitable, Callable, TypeVar, cast
from urllib.parse import parse_qsl

from quart import Quart
from werkzeug.datastructures import ImmutableMultiDict

from .api.messages import inbox_json, post_message
from .api.meta import health_json
from .api.buzz import INGEST_ROUTE, ingest_answer, ingest_path
from .api.wake import wake_for
from .auth import identity_required, parse_bearer
from .errors import render_error
from .gate import Admission, Gate, client_address
from .jsonprovider import StandardJSONProvider
from .metrics import process_metrics
from .schemas import from_body, from_query
from .schemas.messages import InboxQuery, SendMessage
from .schemas.wake import WakeQuery
from .sendroute import SEND_ROUTE, send_recipient
from .settings import MAX_BODY_BYTES

_INBOX = "/api/mailboxes/me/messages"
_WAKE = "/api/wake"
_HEALTH = "/api/health"
_JSON = b"application/json"
# Their route labels (coord_http_requests_total), as API.md writes them (SEND_ROUTE: sendroute.py).
INBOX_ROUTE = _INBOX
WAKE_ROUTE = _WAKE
HEALTH_ROUTE = _HEALTH

Handler = Callable[[Admission, dict, bytes], Awaitable[tuple[int, bytes]]]
Route = tuple[Handler, str]  # a handler and its route label
Headers = list[tuple[bytes, bytes]]
Q = TypeVar("Q", InboxQuery, WakeQuery)


class HotPaths:
    """ASGI middleware: `app.asgi_app = HotPaths(app, coord, gate)`."""

    def __init__(self, app: Quart, coord, gate: Gate):
        self._inner = app.asgi_app
        self._coord = coord
        self._gate = gate
        self._trusted_proxy = coord.settings.trusted_proxy
        # Quart's JSON provider with the compact separators and trailing newline of its responses.
        self._compact = cast(StandardJSONProvider, app.json).dumps_compact
        self._observe = process_metrics().observe_request

    async def __call__(self, scope, receive, send) -> None:
        found = self.route(scope) if scope["type"] == "http" else None
        if found is None:
            await self._inner(scope, receive, send)
            return
        started = perf_counter()
        body = b""
        if scope["method"] == "POST":
            read = await _read_body(receive)
            if read is None:  # the client went away
                return
            body = read
        status, headers, payload = await self.answer(found, scope, body, started)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    def route(self, scope) -> Route | None:
        """The hot route an HTTP request's scope asks for, or None when Quart should have it whole. Reads the
        scope's method, path, query_string and headers (http1.py's direct lane gives no more than these)."""
        method, path = scope["method"], scope["path"]
        if method == "GET" and path == _HEALTH:
            return self._health, HEALTH_ROUTE
        if method == "GET" and path in (_INBOX, _WAKE):
            try:
                scope["query_string"].decode()
            except UnicodeDecodeError:
                return None
            return (self._inbox, INBOX_ROUTE) if path == _INBOX else (self._wake, WAKE_ROUTE)
        if method == "POST":
            # "me" is no recipient (POST .../me/messages is a 405, from Quart); nor is an empty segment
            if send_recipient(path) and _declared_length(scope) is not None:
                return self._send, SEND_ROUTE
            if ingest_path(path) and _declared_length(scope) is not None:
                return self._ingest, INGEST_ROUTE
        return None

    async def answer(self, found: Route, scope, body: bytes, started: float) -> tuple[int, Headers, bytes]:
        """The whole answer to a request `route` took, its body read: status, headers and payload; counted in
        coord_http_requests_total as taking the time since `started` (a perf_counter)."""
        handler, route = found
        status, headers, payload = await self._serve(handler, scope, body)
        self._observe(scope["method"], route, status, perf_counter() - started)
        return status, headers, payload

    async def _serve(self, handler: Handler, scope, body: bytes) -> tuple[int, Headers, bytes]:
        headers = _headers(scope)
        rate_headers: dict[str, str] = {}
        extra: dict[str, str] = {}
        try:
            admission = await self._gate.admit(
                scope["method"], scope["path"], parse_bearer(headers.get(b"authorization", b"").decode("latin-1")),
                lambda: client_address(self._trusted_proxy, headers.get(b"x-forwarded-for", b"").decode("latin-1"),
                                       (scope.get("client") or (None,))[0]), scope["query_string"])
            rate_headers = admission.rate_headers
            status, payload = await handler(admission, scope, body)
        except Exception as error:
            answer = render_error(error, scope["method"], scope["path"])
            status, payload, extra = answer.status, self._json(answer.body), answer.headers
        response_headers = [(b"content-type", _JSON), (b"content-length", str(len(payload)).encode())]
        response_headers += [(k.lower().encode(), v.encode()) for k, v in {**extra, **rate_headers}.items()]
        return status, response_headers, payload

    def _json(self, value) -> bytes:
        return f"{self._compact(value)}\n".encode()

    async def _send(self, admission: Admission, scope, body: bytes) -> tuple[int, bytes]:
        principal = identity_required(admission.principal, admission.token_given)
        recipient = send_recipient(scope["path"])
        assert recipient is not None  # route matched the send route
        data = from_body(SendMessage, body, content_type=_headers(scope).get(b"content-type"))
        return 200, self._json(await post_message(self._coord, principal, recipient, data))

    async def _inbox(self, admission: Admission, scope, body: bytes) -> tuple[int, bytes]:
        principal = identity_required(admission.principal, admission.token_given)
        return 200, (await inbox_json(self._coord, principal, _query(InboxQuery, scope["query_string"]))).encode()


    async def _ingest(self, admission: Admission, scope, body: bytes) -> tuple[int, bytes]:
        found = ingest_path(scope["path"])
        assert found is not None  # route matched the ingest route
        headers = _headers(scope)

        async def read_body() -> bytes:
            return body

        def text(name: bytes) -> str | None:
            value = headers.get(name)
            return None if value is None else value.decode("latin-1")
        return 200, self._json(await ingest_answer(self._coord, *found, read_body, text(b"content-type"),
                                                   text(b"x-github-event"), text(b"x-github-delivery"),
                                                   admission.principal))

    async def _health(self, admission: Admission, scope, body: bytes) -> tuple[int, bytes]:
        return 200, self._json(health_json(self._coord))

    async def _wake(self, admission: Admission, scope, body: bytes) -> tuple[int, bytes]:
        principal = identity_required(admission.principal, admission.token_given)
        text = await wake_for(self._coord, principal.identity, _query(WakeQuery, scope["query_string"]).include_off_hours)
        return 200, f"{text}\n".encode()


def _args(query_string: bytes) -> ImmutableMultiDict:
    """The same parse as werkzeug's request.args."""
    return ImmutableMultiDict(parse_qsl(query_string.decode(), keep_blank_values=True, errors="werkzeug.url_quote"))


@lru_cache(maxsize=256)
def _query(model: type[Q], query_string: bytes) -> Q:
    """A hot route's query, parsed once per distinct query string: clients poll with the same one (a
    refusal raises, and is not kept). Shared between requests, so never changed by its readers."""
    return from_query(model, _args(query_string))


def _headers(scope) -> dict[bytes, bytes]:
    """Request headers by lower-case name; the first of repeated ones, as request.headers.get gives."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        found.setdefault(name.lower(), value)
    return found


def _declared_length(scope) -> int | None:
    """Content-Length when present and within the body limit; otherwise None (Quart handles the rest)."""
    for name, value in scope["headers"]:
        if name.lower() == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return None
            return length if 0 <= length <= MAX_BODY_BYTES else None
    return None


async def _read_body(receive) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
