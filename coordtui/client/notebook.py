"""Collaborative notebook pages: a CRDT provider over the coord notebook WebSocket (UI-free).

    session = NotebookSession("http://127.0.0.1:8420", token, page_id)
    await session.connect()            # waits for the server's full state
    session.insert(0, "héllo ")        # code-point positions; sent to the server at once
    async for changes in session.changes():
        ...                            # remote edits as TextChange lists, code-point positions

When the connection drops for a reason that may pass (a server restart, a network blip), the session
stays usable: local edits go on into the document (`online` is False, `pending_edits` counts them),
and it reconnects by itself with backoff, merges the server's state into the local copy and sends the
server exactly what it lacks. Only a refusal (bad token, page gone, invalid data) or `close()` ends it.

Who is where travels as Yjs awareness (y-protocols awareness updates in `awareness` frames), so
JavaScript Yjs editors see coordtui's cursor and coordtui theirs:

    session.set_user("alice", "#e5a50a")       # shown to the others with the cursor
    session.set_cursor(anchor=3, head=8)       # a selection, in code points (anchor == head: a caret)
    session.cursors                            # {client id: RemoteCursor} of the others; on_cursors says when

A state is `{"user": {"name", "color"}, "cursor": {"anchor", "head"}}` with code-point indices into
the text as its sender saw it (a cursor moves with remote edits only when its owner sends it again).
The local state is renewed every `awareness_renew_seconds` (y-protocols: every 15 s) so the server,
which drops states silent for 30 s, keeps it; states vanish when their editor leaves.

The document is a pycrdt `Doc` holding a `Text` named "content". pycrdt positions are UTF-8 byte
offsets; this module converts, so callers only ever see code points. A UI binding its own editor may
also edit `session.text` directly inside `session.doc.transaction(origin=LOCAL_ORIGIN)`.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable
from urllib.parse import urlencode, urlsplit, urlunsplit

from pycrdt import Awareness, Doc, Text, TextEvent, TransactionEvent
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from .safe_text import neutralise, neutralise_json

LOCAL_ORIGIN = "coordtui-local"
REMOTE_ORIGIN = "coordtui-remote"
TEXT_NAME = "content"
MAX_FRAME_BYTES = 64 * 1024 * 1024  # a full-state sync of a large page can exceed the server's 1 MiB inbound cap
INVALID_DATA, POLICY_VIOLATION, TOO_BIG = 1007, 1008, 1009


def is_final(code: int | None) -> bool:
    """Close codes after which reconnecting cannot help: the server refused us (4xxx) or our data
    (resending the same edits would be refused again, e.g. past the page size cap)."""
    return code is not None and (code >= 4000 or code in (INVALID_DATA, POLICY_VIOLATION, TOO_BIG))


class NotebookError(Exception):
    """The server refused or closed the session (`code` is the WebSocket close code)."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class ReadOnlyError(NotebookError):
    pass


@dataclass(frozen=True)
class TextChange:
    """One remote edit, applied in order: insert `text` at `index`, or delete `length` characters."""
    kind: str  # "insert" or "delete"
    index: int
    text: str = ""
    length: int = 0


@dataclass(frozen=True)
class RemoteCursor:
    """Another editor's awareness state: who (as they name themselves), their colour, and their caret
    (`head`) and selection start (`anchor`) in code points, None when they have not placed one."""
    client_id: int
    name: str
    color: str | None
    anchor: int | None
    head: int | None

    @property
    def selection(self) -> tuple[int, int] | None:
        """(start, end) of a non-empty selection."""
        if self.anchor is None or self.head is None or self.anchor == self.head:
            return None
        return min(self.anchor, self.head), max(self.anchor, self.head)


def cursor_from_state(client_id: int, state: dict[str, Any]) -> RemoteCursor:
    """Read a y-protocols awareness state leniently: other clients put what they like in it."""
    raw_user, raw_cursor = state.get("user"), state.get("cursor")
    user: dict[str, Any] = raw_user if isinstance(raw_user, dict) else {}
    cursor: dict[str, Any] = raw_cursor if isinstance(raw_cursor, dict) else {}
    name, color = user.get("name"), user.get("color")

    def index(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
    return RemoteCursor(client_id, neutralise(name) if isinstance(name, str) else f"editor {client_id}",
                        neutralise(color) if isinstance(color, str) else None,
                        index(cursor.get("anchor")), index(cursor.get("head")))


def byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode())


def socket_url(base_url: str, page_id: str, token: str | None = None) -> str:
    parts = urlsplit(base_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    query = {"page": page_id, **({"token": token} if token else {})}
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + "/api/notebook/ws", urlencode(query), ""))


def delta_to_changes(before: str, delta: list[dict[str, Any]]) -> tuple[list[TextChange], str]:
    """Convert a pycrdt delta (byte counts) against the text `before` into code-point changes.
    Returns the changes and the text after them."""
    changes: list[TextChange] = []
    out: list[str] = []
    old_index = 0      # code points consumed from `before`
    new_index = 0      # code-point position in the text being built
    for op in delta:
        if "retain" in op:
            count = _chars_for_bytes(before, old_index, op["retain"])
            out.append(before[old_index:old_index + count])
            old_index += count
            new_index += count
        elif "insert" in op:
            inserted = op["insert"] if isinstance(op["insert"], str) else ""
            if inserted:
                changes.append(TextChange("insert", new_index, text=inserted))
                out.append(inserted)
                new_index += len(inserted)
        elif "delete" in op:
            count = _chars_for_bytes(before, old_index, op["delete"])
            changes.append(TextChange("delete", new_index, length=count))
            old_index += count
    out.append(before[old_index:])
    return changes, "".join(out)


def _chars_for_bytes(text: str, start: int, byte_count: int) -> int:
    """How many code points from `start` make up `byte_count` UTF-8 bytes."""
    consumed, index = 0, start
    while consumed < byte_count and index < len(text):
        consumed += len(text[index].encode())
        index += 1
    return index - start


class NotebookSession:
    def __init__(self, base_url: str, token: str, page_id: str, *, open_timeout: float = 10.0,
                 backoff: tuple[float, float] = (0.5, 8.0), awareness_renew_seconds: float = 15.0):
        self.base_url = base_url
        self.backoff = backoff
        self.online = False
        self.reconnects = 0
        self.on_state: list[Callable[[], None]] = []  # online/offline and pending-edit changes
        self._closing = False
        self._reconnect_task: asyncio.Task[None] | None = None
        self.page_id = page_id
        self._token = token
        self.open_timeout = open_timeout
        self.doc, self.text = self._new_document()
        self.viewers: list[str] = []
        self.readonly = False
        self.readonly_reason: str | None = None
        self.readonly_message: str | None = None
        self.close_code: int | None = None
        self.close_message: str | None = None
        self.on_change: list[Callable[[list[TextChange]], None]] = []
        self.on_viewers: list[Callable[[list[str]], None]] = []
        self.on_readonly: list[Callable[[bool, str | None], None]] = []
        self.on_closed: list[Callable[[int | None, str | None], None]] = []
        self._shadow = ""
        self._applying_remote = False
        self._quiet = False
        self._ws: ClientConnection | None = None
        self._outgoing: asyncio.Queue[bytes] = asyncio.Queue()  # CRDT updates to send
        self._subscribers: list[asyncio.Queue[list[TextChange] | None]] = []  # changes(); None ends one
        self._tasks: list[asyncio.Task[None]] = []
        self._state_changed = asyncio.Event()
        self._resyncing = False
        self._resync_task: asyncio.Task[None] | None = None
        self.resyncs = 0  # times this session replaced a diverged copy with the server's
        self.awareness = Awareness(self.doc)
        self.awareness.set_local_state(None)  # nothing to show until set_user or set_cursor
        self.awareness_renew_seconds = awareness_renew_seconds
        self.cursors: dict[int, RemoteCursor] = {}
        self.on_cursors: list[Callable[[dict[int, RemoteCursor]], None]] = []
        self._awareness_out: asyncio.Queue[bytes] = asyncio.Queue()

    def _new_document(self) -> tuple[Doc[Text], Text]:
        doc: Doc[Text] = Doc()
        text = doc.get(TEXT_NAME, type=Text)
        doc.observe(self._on_transaction)
        text.observe(self._on_text_event)
        return doc, text

    # --- connecting --------------------------------------------------------------------------
    async def connect(self) -> "NotebookSession":
        ws, state = await self._open()
        self._apply_remote(state)
        self._start(ws)
        return self

    async def open(self) -> "NotebookSession":
        """Like connect(), but a server that cannot be reached (or never syncs) is retried in the
        background; `synced` and on_state say when the document arrives. Refusals still raise."""
        try:
            return await self.connect()
        except NotebookError as exc:
            if is_final(exc.code):
                raise
        except (OSError, asyncio.TimeoutError, ConnectionClosed, InvalidHandshake):
            pass
        self._went_offline()
        return self

    @property
    def synced(self) -> bool:
        """The server's document has arrived at least once (before that the local copy is empty)."""
        return self._ws is not None

    @property
    def pending_edits(self) -> int:
        """Local edits the server has not been sent yet (they wait while offline)."""
        return self._outgoing.qsize()

    async def _reconnect(self) -> None:
        """Back online after a drop: take the server's state into the local document (a CRDT merge:
        nothing typed meanwhile is lost on either side), then send only what the server lacks."""
        delay = self.backoff[0]
        while not self._closing:
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.backoff[1])
            try:
                ws, state = await self._open()
            except NotebookError as exc:
                if is_final(exc.code):
                    self.close_code, self.close_message = exc.code, str(exc)
                    self._finish()
                    return
                continue
            except (OSError, asyncio.TimeoutError, ConnectionClosed, InvalidHandshake):
                continue
            if self._closing:
                await ws.close()
                return
            server: Doc[Text] = Doc()
            server.apply_update(state)
            missing = self.doc.get_update(server.get_state())
            self._outgoing = asyncio.Queue()  # `missing` carries every edit queued while offline
            self._apply_remote(state)
            self.readonly = False  # the new connection says again whether we may edit
            self._outgoing.put_nowait(missing)
            self.reconnects += 1
            self._start(ws)
            return

    def _went_offline(self) -> None:
        self.online = False
        self._forget_others()  # the server tells them again on reconnect
        self._notify_state()
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.ensure_future(self._reconnect())

    def _notify_state(self) -> None:
        self._state_changed.set()  # wakes wait_for() callers: online, offline and pending are state too
        for callback in self.on_state:
            callback()

    async def _open(self) -> tuple[ClientConnection, bytes]:
        ws = await connect(socket_url(self.base_url, self.page_id),
                           additional_headers={"Authorization": f"Bearer {self._token}"},
                           max_size=MAX_FRAME_BYTES, open_timeout=self.open_timeout)
        try:
            first = _frame(await asyncio.wait_for(ws.recv(), self.open_timeout))
        except ConnectionClosed as closed:
            raise NotebookError(_reason(closed), _code(closed)) from None
        if first.get("type") != "sync":
            message = first.get("message") or "unexpected first frame"
            try:
                await asyncio.wait_for(ws.wait_closed(), self.open_timeout)
            except asyncio.TimeoutError:
                pass
            raise NotebookError(message, ws.close_code)
        return ws, bytes(first["update"])

    def _start(self, ws: ClientConnection) -> None:
        self._ws = ws
        self.online = True
        self._awareness_out = asyncio.Queue()
        if self.awareness.get_local_state() is not None:  # a new connection: the server knows nothing of us
            self._awareness_out.put_nowait(self.awareness.encode_awareness_update([self.awareness.client_id]))
        self._tasks = [asyncio.ensure_future(self._read(ws)), asyncio.ensure_future(self._write(ws)),
                       asyncio.ensure_future(self._write_awareness(ws)), asyncio.ensure_future(self._renew_awareness())]
        self._notify_state()

    async def _resync(self) -> None:
        """The server refused an edit already applied here, so this copy has diverged: reconnect,
        take the server's state as a fresh document and report the difference as one remote change."""
        self._resyncing = True
        try:
            old_ws, old_tasks = self._ws, self._tasks
            assert old_ws is not None  # a frame of the open socket started this
            await old_ws.close()
            for task in old_tasks:
                task.cancel()
            await asyncio.gather(*old_tasks, return_exceptions=True)
            self._outgoing = asyncio.Queue()
            self.readonly = False  # the new connection says again whether we may edit
            ws, state = await self._open()
            before = self._shadow
            self.doc, self.text = self._new_document()
            self._shadow = ""
            self._applying_remote, self._quiet = True, True
            try:
                self.doc.apply_update(state)
            finally:
                self._applying_remote, self._quiet = False, False
            self.resyncs += 1
            if self._shadow != before:
                self._emit([TextChange("delete", 0, length=len(before)), TextChange("insert", 0, text=self._shadow)])
            self._start(ws)
        except (OSError, NotebookError, ConnectionClosed) as exc:
            self.close_code = getattr(exc, "code", None) or 1006
            self.close_message = str(exc)
            self._finish()
        finally:
            self._resyncing = False
            self._state_changed.set()

    async def close(self, flush_timeout: float = 5.0) -> None:
        """Send local edits still queued (when online), then close."""
        self._closing = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        if not self.closed and self.online and self._tasks:
            try:
                await asyncio.wait_for(self._outgoing.join(), flush_timeout)
            except asyncio.TimeoutError:
                pass
            if self.awareness.get_local_state() is not None:
                self._set_awareness(None)  # "gone", as y-protocols clients say it when they leave
                try:
                    await asyncio.wait_for(self._awareness_out.join(), flush_timeout)
                except asyncio.TimeoutError:
                    pass
        if self._ws is not None:
            await self._ws.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> "NotebookSession":
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self.close_code is not None

    # --- local edits (code points) -----------------------------------------------------------
    @property
    def value(self) -> str:
        return self._shadow

    def insert(self, index: int, value: str) -> None:
        self._check_editable()
        current = self._shadow
        index = max(0, min(index, len(current)))
        with self.doc.transaction(origin=LOCAL_ORIGIN):
            self.text.insert(byte_offset(current, index), value)

    def delete(self, index: int, length: int) -> None:
        self._check_editable()
        current = self._shadow
        start = max(0, min(index, len(current)))
        end = max(start, min(index + length, len(current)))
        if end > start:
            with self.doc.transaction(origin=LOCAL_ORIGIN):
                del self.text[byte_offset(current, start):byte_offset(current, end)]

    def replace(self, start: int, end: int, value: str) -> None:
        self._check_editable()
        current = self._shadow
        start = max(0, min(start, len(current)))
        end = max(start, min(end, len(current)))
        with self.doc.transaction(origin=LOCAL_ORIGIN):
            if end > start:
                del self.text[byte_offset(current, start):byte_offset(current, end)]
            if value:
                self.text.insert(byte_offset(current, start), value)

    def _check_editable(self) -> None:
        """Offline is editable (the edits wait); read-only and closed are not."""
        if self.readonly:
            raise ReadOnlyError(self.readonly_message or "Page is read-only")
        if not self.synced:
            raise ReadOnlyError("The page has not arrived from the server yet")
        if self.closed:
            raise NotebookError("session is closed", self.close_code)

    # --- awareness (who is where) ------------------------------------------------------------
    def set_user(self, name: str, color: str | None = None) -> None:
        """How the others see this editor: a name and a colour (any CSS colour, e.g. "#e5a50a")."""
        state = dict(self.awareness.get_local_state() or {})
        state["user"] = {"name": name, **({"color": color} if color else {})}
        self._set_awareness(state)

    def set_cursor(self, anchor: int | None, head: int | None = None) -> None:
        """This editor's caret (`head`, code points) and selection start (`anchor`); None hides it."""
        state = dict(self.awareness.get_local_state() or {})
        if anchor is None:
            state.pop("cursor", None)
        else:
            state["cursor"] = {"anchor": anchor, "head": anchor if head is None else head}
        self._set_awareness(state)

    def _set_awareness(self, state: dict[str, Any] | None) -> None:
        self.awareness.set_local_state(state)
        if self.online:
            self._awareness_out.put_nowait(self.awareness.encode_awareness_update([self.awareness.client_id]))

    def _apply_awareness(self, update: bytes) -> None:
        try:
            self.awareness.apply_awareness_update(update, REMOTE_ORIGIN)
        except (IndexError, ValueError, UnicodeDecodeError, RuntimeError):  # RuntimeError: truncated
            return  # a malformed relay changes nobody's cursor
        self._cursors_changed()

    def _forget_others(self) -> None:
        others = [c for c in self.awareness.states if c != self.awareness.client_id]
        if others:
            self.awareness.remove_awareness_states(others, REMOTE_ORIGIN)
            self._cursors_changed()

    def _cursors_changed(self) -> None:
        self.cursors = {client_id: cursor_from_state(client_id, state)
                        for client_id, state in self.awareness.states.items()
                        if client_id != self.awareness.client_id and isinstance(state, dict)}
        for callback in self.on_cursors:
            callback(self.cursors)

    async def _write_awareness(self, ws: ClientConnection) -> None:
        queue = self._awareness_out
        while True:
            update = await queue.get()
            try:
                await ws.send(json.dumps({"type": "awareness", "update": list(update)}, separators=(",", ":")))
            except ConnectionClosed:
                return
            finally:
                queue.task_done()

    async def _renew_awareness(self) -> None:
        while True:
            await asyncio.sleep(self.awareness_renew_seconds)
            state = self.awareness.get_local_state()
            if state is not None:
                self._set_awareness(state)

    # --- remote changes ----------------------------------------------------------------------
    def changes(self) -> AsyncIterator[list[TextChange]]:
        """Remote edits as they arrive (ends when the session closes)."""
        queue: asyncio.Queue[list[TextChange] | None] = asyncio.Queue()
        self._subscribers.append(queue)

        async def iterate() -> AsyncIterator[list[TextChange]]:
            try:
                while True:
                    item = await queue.get()
                    if item is None:
                        return
                    yield item
            finally:
                if queue in self._subscribers:
                    self._subscribers.remove(queue)
        return iterate()

    async def wait_for(self, predicate: Callable[["NotebookSession"], bool], timeout: float = 10.0) -> None:
        """Wait until `predicate(self)` holds: checked after every frame and state change, and at
        least every 0.2 s, since a predicate may also read state outside this session (another
        editor's text) that changes without a frame arriving here."""
        async def loop() -> None:
            while not predicate(self):
                self._state_changed.clear()
                if predicate(self):
                    return
                if self.closed:
                    raise NotebookError(self.close_message or "session closed", self.close_code)
                try:
                    await asyncio.wait_for(self._state_changed.wait(), 0.2)
                except asyncio.TimeoutError:
                    pass
        await asyncio.wait_for(loop(), timeout)

    # --- internals ---------------------------------------------------------------------------
    def _on_transaction(self, event: TransactionEvent) -> None:
        if not self._applying_remote:
            self._outgoing.put_nowait(event.update)
            if not self.online:
                self._notify_state()

    def _on_text_event(self, event: TextEvent) -> None:
        # pycrdt declares TextEvent's attributes in __slots__ only, without types
        changes, self._shadow = delta_to_changes(self._shadow, event.delta)  # type: ignore[attr-defined]
        if self._applying_remote and changes and not self._quiet:
            self._emit(changes)

    def _emit(self, changes: list[TextChange]) -> None:
        for callback in self.on_change:
            callback(changes)
        for queue in self._subscribers:
            queue.put_nowait(changes)

    def _apply_remote(self, update: bytes) -> None:
        self._applying_remote = True
        try:
            with self.doc.transaction(origin=REMOTE_ORIGIN):
                self.doc.apply_update(update)
        finally:
            self._applying_remote = False

    async def _write(self, ws: ClientConnection) -> None:
        queue = self._outgoing
        while True:
            update = await queue.get()
            try:
                await ws.send(json.dumps({"type": "update", "update": list(update)}, separators=(",", ":")))
            except ConnectionClosed:
                return  # the reader sees the close; everything unsent is in the local document
            finally:
                queue.task_done()
            if queue.empty():
                self._notify_state()

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for raw in ws:
                self._handle(_frame(raw))
                self._state_changed.set()
        except ConnectionClosed:
            pass
        if self._resyncing or ws is not self._ws:
            return
        code = ws.close_code if ws.close_code is not None else 1006
        if self._closing or is_final(code):
            self.close_code = code
            self.close_message = self.close_message or neutralise(ws.close_reason or "") or None
            self.online = False
            self._finish()
            return
        for task in self._tasks:  # the writer of the dead socket: its queue is resent on reconnect
            if task is not asyncio.current_task():
                task.cancel()
        self._went_offline()

    def _finish(self) -> None:
        for callback in self.on_closed:
            callback(self.close_code, self.close_message)
        for queue in self._subscribers:
            queue.put_nowait(None)
        self._state_changed.set()

    def _handle(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind in ("update", "sync"):
            self._apply_remote(bytes(message["update"]))
        elif kind == "awareness":
            self._apply_awareness(bytes(message["update"]))
        elif kind == "viewers":
            self.viewers = list(message.get("viewers") or [])
            for callback in self.on_viewers:
                callback(self.viewers)
        elif kind == "readonly":
            if self.readonly and not self._resyncing:
                # Already read-only, so this answers an update of ours that was refused.
                self._resync_task = asyncio.ensure_future(self._resync())
                return
            self._set_readonly(True, message.get("reason"), message.get("message"))
        elif kind == "editable":
            self._set_readonly(False, None, None)
        elif kind == "error":
            self.close_message = message.get("message")

    def _set_readonly(self, readonly: bool, reason: str | None, message: str | None) -> None:
        changed = readonly != self.readonly or reason != self.readonly_reason
        self.readonly, self.readonly_reason, self.readonly_message = readonly, reason, message
        if changed:
            for callback in self.on_readonly:
                callback(readonly, reason)


def _code(closed: ConnectionClosed) -> int | None:
    return closed.rcvd.code if closed.rcvd is not None else None


def _reason(closed: ConnectionClosed) -> str:
    return neutralise(closed.rcvd.reason if closed.rcvd is not None else "") or "connection closed"


UPDATE_FRAMES = frozenset({"sync", "update", "awareness"})  # awareness names are neutralised in cursor_from_state


def _frame(raw: str | bytes) -> dict[str, Any]:
    """One server frame, decoded. Text frames (viewers, read-only, errors) are neutralised for the terminal
    (safe_text.py); sync and update frames carry only a CRDT update, a list of bytes: the document's text is
    neutralised where it is shown (panes/collab.py), never in the shared document itself."""
    message = json.loads(raw)
    if not isinstance(message, dict):
        return {}
    return message if message.get("type") in UPDATE_FRAMES else neutralise_json(message)
