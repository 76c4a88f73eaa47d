"""Live notebook pages: one room per open page, holding the CRDT document its editors share.

- A peer's update is applied to the room's document, relayed to the room's other peers and published
  on the bus (channel `notebook:<pageId>`, tagged with the room's origin id). The room ignores its own
  publishes (the LocalBus delivers them synchronously), so nothing is applied twice; rooms of the
  same page in other processes (PostgresBus) apply the update and relay it to their peers. Updates
  too large for a NOTIFY travel as a reference to a short-lived NotebookRelay row.
- Saves are debounced, one at a time per room, merge with whatever is stored (another process may
  have saved meanwhile), and are retried until they succeed; the document is never dropped unsaved.
  When the last peer leaves the room saves at once and is unloaded `notebook_unload_seconds` later.
- Page metadata changes (lock, archive, tags) arrive on the same channel from the domain's commits;
  the room tells peers `readonly`/`editable` and closes peers that may no longer see the page.
- Each room announces its own viewers on the channel when they change and again every
  `notebook_viewers_refresh_seconds`; other processes' announcements expire after three intervals,
  so a process that dies without saying goodbye leaves no ghost viewers behind.
"""
from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Callable

from pycrdt import Doc, Text

from .. import jsonstrict
from ..domain import notebook as pages
from ..domain.visibility import can_see, is_owner
from ..errors import log_background_failure

log = logging.getLogger("coord.notebook")

HEARTBEAT_WINDOW = timedelta(seconds=45)
SAVE_RETRY_SECONDS = 2.0
MAX_QUEUED_FRAMES = 5000
MAX_READ_BASES = 512  # (page, reader) document states kept as bases for three-way PATCH merges

CLOSE_NOT_FOUND = 4004
CLOSE_INVALID_DATA = 1007
CLOSE_TRY_AGAIN = 1013
CLOSE_GOING_AWAY = 1001


def frame(kind: str, **fields) -> str:
    return jsonstrict.dumps({"type": kind, **fields})


def update_frame(update: bytes) -> str:
    return frame("update", update=list(update))


class Peer:
    """One WebSocket connection, as the room sees it. Frames are queued; the socket task sends them."""

    def __init__(self, identity: str, is_admin: bool):
        self.identity = identity
        self.is_admin = is_admin
        self.outbox: asyncio.Queue = asyncio.Queue()
        self.closing = False

    def send(self, text: str) -> None:
        if self.closing:
            return
        if self.outbox.qsize() >= MAX_QUEUED_FRAMES:
            self.close(CLOSE_TRY_AGAIN, "Too far behind; reconnect")
            return
        self.outbox.put_nowait(text)

    def close(self, code: int, message: str) -> None:
        if self.closing:
            return
        self.closing = True
        self.outbox.put_nowait((code, message))


class Room:
    def __init__(self, manager: "NotebookRooms", page_id: str, state: bytes, meta: dict):
        self.manager = manager
        self.page_id = page_id
        self.origin = uuid.uuid4().hex
        self.doc: Doc = pages.load_document(state)
        self.text: Text = self.doc.get(pages.TEXT_NAME, type=Text)
        self.meta = meta
        self.peers: set[Peer] = set()
        self.remote_viewers: dict[str, tuple[list[str], datetime]] = {}  # origin -> (names, heard at)
        self.version = 0          # bumped by every change to the document
        self.saved_version = 0
        self.editors: dict[str, int] = {}  # identity -> version of their latest unsaved edit
        self._save_lock = asyncio.Lock()
        self._save_timer: asyncio.TimerHandle | None = None
        self._unload_timer: asyncio.TimerHandle | None = None
        self.unsubscribe: Callable[[], None] = manager.bus.subscribe(pages.channel(page_id), self.on_bus)

    # --- who may do what ---------------------------------------------------------------------
    def may_see(self, peer: Peer) -> bool:
        return can_see(self.meta["createdBy"], self.meta["taggedUsers"], peer.identity, peer.is_admin)

    def may_edit(self, peer: Peer) -> bool:
        if self.meta["archived"]:
            return False
        return not self.meta["locked"] or is_owner(self.meta["createdBy"], peer.identity, peer.is_admin)

    def readonly_frame(self) -> str:
        if self.meta["archived"]:
            return frame("readonly", reason="archived", message="Page is archived")
        return frame("readonly", reason="locked", message="Page is locked")

    @property
    def saved(self) -> bool:
        return self.version == self.saved_version

    # --- peers -------------------------------------------------------------------------------
    def join(self, peer: Peer) -> None:
        self.cancel_unload()
        self.peers.add(peer)
        peer.send(frame("sync", update=list(self.doc.get_update())))
        if not self.may_edit(peer):
            peer.send(self.readonly_frame())
        self._viewers_changed()

    def leave(self, peer: Peer) -> None:
        if peer not in self.peers:
            return
        self.peers.discard(peer)
        self._viewers_changed()
        if not self.peers:
            self.manager.room_idle(self)

    def viewers(self) -> list[str]:
        names = {p.identity for p in self.peers}
        for remote, _heard in self.remote_viewers.values():
            names.update(remote)
        return sorted(names)

    def _viewers_changed(self) -> None:
        self.broadcast(frame("viewers", viewers=self.viewers()))
        self.announce_viewers()

    def announce_viewers(self) -> None:
        """Tell the page's rooms in other processes who is here."""
        self.manager.bus.publish(pages.channel(self.page_id), {
            "kind": "viewers", "origin": self.origin, "viewers": sorted({p.identity for p in self.peers})})

    def expire_remote_viewers(self, now: datetime, ttl: timedelta) -> None:
        """Forget announcements not refreshed within `ttl`: their process is gone."""
        stale = [origin for origin, (_names, heard) in self.remote_viewers.items() if now - heard > ttl]
        if stale:
            before = self.viewers()
            for origin in stale:
                del self.remote_viewers[origin]
            self._tell_viewers_if_changed(before)

    def _tell_viewers_if_changed(self, before: list[str]) -> None:
        viewers = self.viewers()
        if viewers != before:
            self.broadcast(frame("viewers", viewers=viewers))

    def broadcast(self, text: str, exclude: Peer | None = None) -> None:
        for peer in list(self.peers):
            if peer is not exclude:
                peer.send(text)

    # --- edits -------------------------------------------------------------------------------
    def receive(self, peer: Peer, update: bytes) -> None:
        """A peer's update: refused on a read-only page, else applied, relayed and published."""
        if not self.may_edit(peer):
            peer.send(self.readonly_frame())
            return
        try:
            self.doc.apply_update(update)
        except BaseException as exc:  # pycrdt reports malformed updates as a Rust panic (BaseException)
            if isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
                raise
            peer.close(CLOSE_INVALID_DATA, "Invalid Yjs update")
            return
        self._changed(peer.identity)
        self.broadcast(update_frame(update), exclude=peer)
        self.manager.publish_update(self, update)

    def merge_content(self, content: str, base: bytes | None) -> None:
        """A REST PATCH of content, as a diff: peers get an update and keep their own edits."""
        update = pages.merge_text_from(self.doc, base, content)
        if update is None:
            return
        self.version += 1  # the PATCH logged its own event, so this edit names no editor
        self.schedule_save()
        self.broadcast(update_frame(update))
        self.manager.publish_update(self, update)

    def apply_remote(self, update: bytes, bump: bool = True) -> None:
        """An update from another process (or from storage): apply and relay to every peer."""
        try:
            self.doc.apply_update(update)
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
                raise
            log.warning("ignoring an invalid update for page %s from the bus", self.page_id)
            return
        if bump:
            self.version += 1
            self.schedule_save()
        self.broadcast(update_frame(update))

    def _changed(self, identity: str) -> None:
        self.version += 1
        self.editors.pop(identity, None)
        self.editors[identity] = self.version
        self.schedule_save()

    # --- bus ---------------------------------------------------------------------------------
    def on_bus(self, payload: dict) -> None:
        if payload.get("origin") == self.origin:
            return
        kind = payload.get("kind")
        if kind == "update":
            if "relay" in payload:
                self.manager.coord.spawn(self._apply_relay(payload["relay"]), "notebook-relay")
            else:
                self.apply_remote(base64.b64decode(payload["update"]))
        elif kind == "meta":
            self.set_meta({k: payload[k] for k in ("createdBy", "taggedUsers", "locked", "lockedBy", "archived")})
        elif kind == "viewers":
            before = self.viewers()
            if payload["viewers"]:
                self.remote_viewers[payload["origin"]] = (payload["viewers"], self.manager.coord.now())
            else:
                self.remote_viewers.pop(payload["origin"], None)
            self._tell_viewers_if_changed(before)

    async def _apply_relay(self, relay_id: int) -> None:
        update = await self.manager.coord.store.read(pages.load_relay, relay_id)
        if update is not None:
            self.apply_remote(update)

    def set_meta(self, meta: dict) -> None:
        before = {peer: self.may_edit(peer) for peer in self.peers}
        self.meta = meta
        for peer, could_edit in before.items():
            if not self.may_see(peer):
                peer.close(CLOSE_NOT_FOUND, "Page not found")
                continue
            can_edit = self.may_edit(peer)
            if could_edit and not can_edit:
                peer.send(self.readonly_frame())
            elif can_edit and not could_edit:
                peer.send(frame("editable"))

    # --- saving and unloading ----------------------------------------------------------------
    def schedule_save(self, delay: float | None = None) -> None:
        if self._save_timer is not None:
            return
        delay = self.manager.save_seconds if delay is None else delay
        self._save_timer = asyncio.get_running_loop().call_later(delay, self._save_due)

    def _save_due(self) -> None:
        self._save_timer = None
        self.manager.coord.spawn(self.save(), "notebook-save")

    async def save(self) -> bool:
        """Persist the document if it changed since the last save. One save at a time; a failure
        keeps the document in memory and schedules a retry."""
        async with self._save_lock:
            if self.saved:
                return True
            version = self.version
            state, state_vector = self.doc.get_update(), self.doc.get_state()
            editors = [who for who, _ in sorted(self.editors.items(), key=lambda item: item[1])]
            try:
                missing = await self.manager.coord.store.write(
                    pages.save_document, self.page_id, state, state_vector, editors, self.manager.env_admins)
            except Exception:
                log_background_failure(log, "saving notebook page %s failed; retrying", self.page_id)
                self.schedule_save(SAVE_RETRY_SECONDS)
                return False
            self.saved_version = max(self.saved_version, version)
            self.editors = {who: v for who, v in self.editors.items() if v > version}
            if missing is not None:  # stored by another process and not yet heard on the bus
                self.apply_remote(missing, bump=False)
            return True

    async def catch_up(self) -> None:
        """After this process's bus connection came back: edits made elsewhere meanwhile were never
        heard here, nor ours there. Send our whole document (merging is idempotent), take what the
        stored document has that we lack, and say again who is here."""
        self.manager.publish_update(self, self.doc.get_update())
        self.announce_viewers()
        stored = await self.manager.coord.store.read(pages.stored_state, self.page_id)
        if stored is not None:
            missing = pages.load_document(stored).get_update(self.doc.get_state())
            if pages.has_content(missing):
                self.apply_remote(missing, bump=False)

    async def flush(self) -> bool:
        if self._save_timer is not None:
            self._save_timer.cancel()
            self._save_timer = None
        return await self.save()

    def schedule_unload(self) -> None:
        self.cancel_unload()
        self._unload_timer = asyncio.get_running_loop().call_later(
            self.manager.unload_seconds, self.manager.unload_if_idle, self)

    def cancel_unload(self) -> None:
        if self._unload_timer is not None:
            self._unload_timer.cancel()
            self._unload_timer = None

    def close(self) -> None:
        self.cancel_unload()
        if self._save_timer is not None:
            self._save_timer.cancel()
            self._save_timer = None
        self.unsubscribe()


class NotebookRooms:
    """coord.services["notebook"]: the rooms of this process and the REST viewers' heartbeats."""

    def __init__(self, coord):
        self.coord = coord
        self.bus = coord.bus
        self.rooms: dict[str, Room] = {}
        self.heartbeats: dict[str, dict[str, object]] = {}
        self.read_bases: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._opening: dict[str, asyncio.Task] = {}
        self._unsubscribe_bus: Callable[[], None] | None = None
        self.env_admins = frozenset(t.identity for t in coord.settings.env_tokens.values() if t.is_admin)

    @property
    def save_seconds(self) -> float:
        return self.coord.settings.notebook_save_seconds

    @property
    def unload_seconds(self) -> float:
        return self.coord.settings.notebook_unload_seconds

    async def start(self) -> None:
        self.coord.spawn(self._refresh_viewers(), "notebook-viewers")
        self._unsubscribe_bus = self.bus.subscribe("bus", self._on_bus_reconnected)

    def _on_bus_reconnected(self, _payload: dict) -> None:
        for room in list(self.rooms.values()):
            self.coord.spawn(room.catch_up(), "notebook-catch-up")

    async def _refresh_viewers(self) -> None:
        interval = self.coord.settings.notebook_viewers_refresh_seconds
        ttl = timedelta(seconds=3 * interval)
        while True:
            await asyncio.sleep(interval)
            now = self.coord.now()
            for room in list(self.rooms.values()):
                try:
                    if room.peers:
                        room.announce_viewers()
                    room.expire_remote_viewers(now, ttl)
                except Exception:  # one room's trouble must not stop the refresh for the others
                    log.exception("refreshing the viewers of notebook page %s failed", room.page_id)

    async def stop(self) -> None:
        """Shutdown: close every socket, then save every room (retrying a few times)."""
        if self._unsubscribe_bus is not None:
            self._unsubscribe_bus()
        for room in list(self.rooms.values()):
            for peer in list(room.peers):
                peer.close(CLOSE_GOING_AWAY, "Server shutting down")
        for room in list(self.rooms.values()):
            for _ in range(3):
                if await room.flush():
                    break
                await asyncio.sleep(0.5)
            else:
                log.error("notebook page %s could not be saved at shutdown", room.page_id)
            room.close()
        self.rooms.clear()

    # --- rooms -------------------------------------------------------------------------------
    async def room(self, page_id: str) -> Room | None:
        """The page's room, opened if needed. Concurrent openers share one load (no duplicate rooms)."""
        room = self.rooms.get(page_id)
        if room is not None:
            return room
        task = self._opening.get(page_id)
        if task is None:
            task = asyncio.ensure_future(self._open(page_id))
            self._opening[page_id] = task
            task.add_done_callback(lambda _t: self._opening.pop(page_id, None))
        return await asyncio.shield(task)

    async def _open(self, page_id: str) -> Room | None:
        stored = await self.coord.store.write(pages.stored_document, page_id)
        if stored is None:
            return None
        room = self.rooms.get(page_id)
        if room is None:
            room = Room(self, page_id, *stored)
            self.rooms[page_id] = room
        return room

    async def join(self, page_id: str, peer: Peer) -> Room | None:
        """The room the peer joined, or None when the page is absent or not visible to the peer."""
        room = await self.room(page_id)
        if room is None:
            return None
        if not room.may_see(peer):
            if not room.peers:
                self.room_idle(room)
            return None
        room.join(peer)
        return room

    def room_idle(self, room: Room) -> None:
        """The last peer left: save now, unload later."""
        async def flush_then_unload() -> None:
            await room.flush()
            if not room.peers:
                room.schedule_unload()
        self.coord.spawn(flush_then_unload(), "notebook-idle")

    def unload_if_idle(self, room: Room) -> None:
        if room.peers or self.rooms.get(room.page_id) is not room:
            return
        if not room.saved:
            room.schedule_save(0)
            room.schedule_unload()
            return
        room.close()
        del self.rooms[room.page_id]

    def publish_update(self, room: Room, update: bytes) -> None:
        encoded = base64.b64encode(update).decode()
        if len(encoded) <= pages.BUS_INLINE_LIMIT:
            self.bus.publish(pages.channel(room.page_id), {"kind": "update", "origin": room.origin, "update": encoded})
            return

        async def publish_large() -> None:
            payload = await self.coord.store.write(pages.bus_update, room.page_id, update, room.origin)
            self.bus.publish(pages.channel(room.page_id), payload)
        self.coord.spawn(publish_large(), "notebook-relay")

    # --- REST helpers --------------------------------------------------------------------------
    def live_text(self, page_id: str) -> str | None:
        room = self.rooms.get(page_id)
        return pages.document_text(room.doc) if room is not None else None

    async def merge_content(self, page_id: str, content: str, base: bytes | None) -> bool:
        """Merge a PATCHed content into the live room and save it. False if no room holds the page."""
        room = self.rooms.get(page_id)
        if room is None:
            return False
        room.merge_content(content, base)
        await room.flush()
        return True

    def remember_read(self, page_id: str, identity: str, stored_state: bytes | None) -> None:
        """The document state `identity` just read (the live one if a room is open): the base of
        their next PATCH of content, so that PATCH merges three-way."""
        room = self.rooms.get(page_id)
        state = room.doc.get_update() if room is not None else stored_state
        if state is None:
            return
        key = (page_id, identity)
        self.read_bases.pop(key, None)
        self.read_bases[key] = state
        while len(self.read_bases) > MAX_READ_BASES:
            self.read_bases.popitem(last=False)

    def read_base(self, page_id: str, identity: str) -> bytes | None:
        return self.read_bases.get((page_id, identity))

    def heartbeat(self, page_id: str, identity: str) -> list[str]:
        now = self.coord.now()
        beats = self.heartbeats.setdefault(page_id, {})
        beats[identity] = now
        for who, when in list(beats.items()):
            if now - when > HEARTBEAT_WINDOW:
                del beats[who]
        return self.viewers(page_id)

    def viewers(self, page_id: str) -> list[str]:
        now = self.coord.now()
        names = {who for who, when in self.heartbeats.get(page_id, {}).items() if now - when <= HEARTBEAT_WINDOW}
        room = self.rooms.get(page_id)
        if room is not None:
            names.update(room.viewers())
        return sorted(names)
