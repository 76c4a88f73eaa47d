"""The live notebook rooms of this process (coord.services.notebook) and the REST helpers around
them: live text, PATCH merges with their read bases, and viewers' heartbeats. See room.py."""
from __future__ import annotations

import asyncio
import base64
import logging
from datetime import timedelta
from typing import Callable

from ...domain import notebook as pages, notebook_versions as versions
from .peer import CLOSE_GOING_AWAY, Peer
from .room import Room
from ...events.channels import BUS, NOTEBOOK, NOTEBOOK_HEARTBEAT

log = logging.getLogger("coord.notebook")

HEARTBEAT_WINDOW = timedelta(seconds=45)


class NotebookRooms:
    """coord.services.notebook: the rooms of this process and the REST viewers' heartbeats."""

    def __init__(self, coord):
        self.coord = coord
        self.bus = coord.bus
        self.rooms: dict[str, Room] = {}
        self.heartbeats: dict[str, dict[str, object]] = {}
        self._opening: dict[str, asyncio.Task] = {}
        self._unsubscribe_bus: Callable[[], None] | None = None
        self._unsubscribe_beats: Callable[[], None] | None = None
        self.env_admins = frozenset(t.identity for t in coord.settings.env_tokens.values() if t.is_admin)

    @property
    def save_seconds(self) -> float:
        return self.coord.settings.notebook_save_seconds

    @property
    def unload_seconds(self) -> float:
        return self.coord.settings.notebook_unload_seconds

    @property
    def awareness_timeout_seconds(self) -> float:
        return self.coord.settings.notebook_awareness_timeout_seconds

    async def start(self) -> None:
        self.coord.spawn(self._refresh_viewers(), "notebook-viewers")
        self.coord.spawn(self._drop_silent_awareness(), "notebook-awareness")
        self._unsubscribe_bus = self.bus.subscribe(BUS, self._on_bus_reconnected)
        self._unsubscribe_beats = self.bus.subscribe(NOTEBOOK_HEARTBEAT, self._on_heartbeat)

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

    async def _drop_silent_awareness(self) -> None:
        """As y-protocols clients do: look every tenth of the timeout for states not renewed in time."""
        while True:
            await asyncio.sleep(self.awareness_timeout_seconds / 10)
            for room in list(self.rooms.values()):
                try:
                    room.drop_silent_awareness()
                except Exception:  # one room's trouble must not stop the others
                    log.exception("dropping silent awareness of notebook page %s failed", room.page_id)

    async def stop(self) -> None:
        """Shutdown: close every socket, then save every room (retrying a few times)."""
        if self._unsubscribe_bus is not None:
            self._unsubscribe_bus()
        if self._unsubscribe_beats is not None:
            self._unsubscribe_beats()
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
        """The last peer left: save now, keep a version if it was the page's last editor anywhere
        (no editors in other processes either), unload later."""
        async def flush_then_unload() -> None:
            saved = await room.flush()
            if not room.peers:
                room.schedule_unload()
            if saved and not room.viewers():
                await self.coord.store.write(versions.version_when_idle, room.page_id, self.env_admins)
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
            self.bus.publish(NOTEBOOK.of(room.page_id), {"kind": "update", "origin": room.origin, "update": encoded})
            return

        async def publish_large() -> None:
            payload = await self.coord.store.write(pages.bus_update, room.page_id, update, room.origin)
            self.bus.publish(NOTEBOOK.of(room.page_id), payload)
        self.coord.spawn(publish_large(), "notebook-relay")

    # --- REST helpers --------------------------------------------------------------------------
    async def flush(self, page_id: str) -> None:
        """Save the live document of this process's room now, if there is one."""
        room = self.rooms.get(page_id)
        if room is not None:
            await room.flush()

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

    async def remember_read(self, page_id: str, identity: str, stored_state: bytes | None) -> None:
        """The document state `identity` just read (the live one if a room of this process is open):
        the base of their next PATCH of content, so that PATCH merges three-way. Kept in the database
        (pages.remember_read): the PATCH may be served by another worker process."""
        room = self.rooms.get(page_id)
        state = room.doc.get_update() if room is not None else stored_state
        if state is not None:
            await self.coord.store.write(pages.remember_read, page_id, identity, state)

    async def read_base(self, page_id: str, identity: str) -> bytes | None:
        return await self.coord.store.read(pages.read_base, page_id, identity)

    def heartbeat(self, page_id: str, identity: str) -> list[str]:
        """A REST viewer's heartbeat, told to the other worker processes too (`notebook_heartbeat`)."""
        self._record_beat(page_id, identity)
        self.bus.publish(NOTEBOOK_HEARTBEAT, {"page": page_id, "identity": identity})
        return self.viewers(page_id)

    def _on_heartbeat(self, payload: dict) -> None:
        if isinstance(payload, dict) and isinstance(payload.get("page"), str) \
                and isinstance(payload.get("identity"), str):
            self._record_beat(payload["page"], payload["identity"])

    def _record_beat(self, page_id: str, identity: str) -> None:
        now = self.coord.now()
        beats = self.heartbeats.setdefault(page_id, {})
        beats[identity] = now
        for who, when in list(beats.items()):
            if now - when > HEARTBEAT_WINDOW:
                del beats[who]

    def viewers(self, page_id: str) -> list[str]:
        now = self.coord.now()
        names = {who for who, when in self.heartbeats.get(page_id, {}).items() if now - when <= HEARTBEAT_WINDOW}
        room = self.rooms.get(page_id)
        if room is not None:
            names.update(room.viewers())
        return sorted(names)
