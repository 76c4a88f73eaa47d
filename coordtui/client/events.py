"""The event stream: SSE over httpx-sse with reconnect backoff, Last-Event-ID resume and resync."""
from __future__ import annotations

import asyncio
import json
import random
from typing import Any, Awaitable, Callable

import httpx
from httpx_sse import aconnect_sse

from .api import error_text, tls_for
from .models import JSONObject, ServerEvent
from .safe_text import neutralise_json

LOGGED_TYPES = frozenset({"message", "chat_message", "swarm_task_created", "swarm_task_updated", "broadcast",
                          "notebook_page_updated", "notebook_version", "ask", "ask_answered", "ask_expired",
                          "ask_cancelled", "ask_read", "alert_changed"})

CONNECTING, CONNECTED, RECONNECTING, DISCONNECTED, REFUSED = (
    "connecting", "connected", "reconnecting", "disconnected", "refused")

EventHandler = Callable[[ServerEvent], None]
StateHandler = Callable[[str, str], None]


class EventStream:
    """Keeps one `/api/stream` open: reconnects with capped exponential backoff and resumes from the last event id.

    Handlers are called on the caller's event loop. A replayed event is never handed out twice: logged events
    carry increasing ids and anything at or below the last seen id is dropped.

    Ids come as the server gave them (`1532.kqzvbf`: a number and a tag of that event; other v1 servers
    send plain numbers) and go back unchanged as Last-Event-ID, so coordserver can tell a log restored
    from a backup from the one we read (it answers `resync`, reason `restored`). The number orders them.
    """

    def __init__(self, base_url: str, token: str, on_event: EventHandler, on_state: StateHandler,
                 on_resync: Callable[[], Awaitable[None] | None] | None = None, *,
                 min_backoff: float = 0.25, max_backoff: float = 8.0, read_timeout: float = 95.0,
                 transport: httpx.AsyncBaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.on_event = on_event
        self.on_state = on_state
        self.on_resync = on_resync
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.read_timeout = read_timeout
        self.transport = transport
        self.last_event_id: int | None = None   # the number of the last event handled
        self.resume_id: str | None = None       # its id as the server gave it: sent back as Last-Event-ID
        self._server_last: tuple[int, str] | None = None  # the newest logged event, as the last `connected` said
        self.state = CONNECTING
        self.connections = 0
        self.query_token = False
        self._retry_now = asyncio.Event()

    def retry_now(self) -> None:
        """The server answered another request, so it is back: end the backoff wait and reconnect at once."""
        if self.state != CONNECTED:
            self._retry_now.set()

    async def _back_off(self, delay: float) -> bool:
        """Sleep `delay` (with jitter) unless retry_now() cuts it short; True when it did."""
        self._retry_now.clear()
        try:
            await asyncio.wait_for(self._retry_now.wait(), delay * (0.8 + 0.4 * random.random()))
        except asyncio.TimeoutError:
            return False
        return True

    def _set_state(self, state: str, detail: str = "") -> None:
        self.state = state
        self.on_state(state, detail)

    async def run(self) -> None:
        """Runs until cancelled (or the token is refused)."""
        delay = self.min_backoff
        timeout = httpx.Timeout(10.0, read=self.read_timeout)
        async with httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=self.transport,
                                     verify=tls_for(self.base_url)) as http:
            while True:
                try:
                    got_events = await self._stream_once(http)
                except _Refused as refused:
                    self._set_state(REFUSED, str(refused))
                    return
                except (httpx.TransportError, httpx.StreamError) as exc:
                    got_events = False
                    was_connected = self.state == CONNECTED
                    self._set_state(RECONNECTING if was_connected else DISCONNECTED,
                                    f"{exc.__class__.__name__}; retrying in {delay:.1f}s")
                else:
                    self._set_state(RECONNECTING, f"stream ended; retrying in {delay:.1f}s")
                if got_events:
                    delay = self.min_backoff
                cut_short = await self._back_off(delay)
                delay = self.min_backoff if cut_short else min(self.max_backoff, delay * 2)

    async def _stream_once(self, http: httpx.AsyncClient) -> bool:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream"}
        if self.resume_id is not None:
            headers["Last-Event-ID"] = self.resume_id
        params = {"token": self.token} if self.query_token else None
        got_events = False
        async with aconnect_sse(http, "GET", "/api/stream", headers=headers, params=params) as source:
            response = source.response
            if response.status_code in (401, 403):
                await response.aread()
                if not self.query_token:
                    # other v1 servers read the stream token only from ?token=: try that once before giving up
                    self.query_token = True
                    return await self._stream_once(http)
                raise _Refused(error_text(response.status_code, _json(response.text), "token refused"))
            if response.status_code != 200:
                await response.aread()
                raise httpx.TransportError(f"HTTP {response.status_code}")
            self.connections += 1
            async for sse in source.aiter_sse():
                got_events = True
                self._dispatch(sse.event or "message", sse.data, sse.id)
        return got_events

    def _dispatch(self, event_type: str, raw: str, raw_id: str) -> None:
        data = _json(raw)
        if not isinstance(data, dict):
            data = {"value": data}
        event_type = event_type if event_type != "message" or "type" not in data else data.get("type") or event_type
        # httpx-sse repeats the last id on frames without one (as the SSE spec says): only logged types own theirs
        event_id = event_number(raw_id) if event_type in LOGGED_TYPES else None
        if event_id is not None:
            if self.last_event_id is not None and event_id <= self.last_event_id:
                return  # a replay of something already handled
            self._resume_at(event_id, raw_id)
        if event_type == "connected":
            self._server_last = _server_position(data)
            if self.last_event_id is None and self._server_last is not None:
                self._resume_at(*self._server_last)
            self._set_state(CONNECTED, str(data.get("identity") or ""))
        elif event_type == "resync":
            if data.get("reason") in ("ahead", "restored"):  # not the log we read: take the server's position
                self.last_event_id, self.resume_id = self._server_last or (None, None)
            elif isinstance(data.get("oldestEventId"), int):
                self._resume_at(max(self.last_event_id or 0, data["oldestEventId"] - 1))
            if self.on_resync is not None:
                result = self.on_resync()
                if asyncio.iscoroutine(result):
                    asyncio.ensure_future(result)
        self.on_event(ServerEvent(event_type, data, event_id))


    def _resume_at(self, number: int, stream_id: str | None = None) -> None:
        self.last_event_id, self.resume_id = number, stream_id or str(number)


def event_number(raw_id: str | None) -> int | None:
    """The number of an event id (`1532.kqzvbf` or a plain `1532`), None if it has none."""
    number = (raw_id or "").partition(".")[0]
    return int(number) if number.isdigit() else None


def _server_position(connected: JSONObject) -> tuple[int, str] | None:
    """The newest logged event named by `connected`: (number, id to resume from)."""
    latest = connected.get("lastEventId")
    if not isinstance(latest, int):
        return None
    resume_from = connected.get("resumeFrom")
    return latest, resume_from if isinstance(resume_from, str) and event_number(resume_from) == latest else str(latest)


class _Refused(Exception):
    pass


def _json(text: str) -> Any:
    """An event's data, its strings neutralised for the terminal (safe_text.py)."""
    try:
        return neutralise_json(json.loads(text) if text else {})
    except ValueError:
        return neutralise_json({"text": text})
