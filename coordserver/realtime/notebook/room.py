"""Live notebook pages: one room per open page, holding the CRDT document its editors share.
(The rooms of a process are kept by rooms.NotebookRooms, which a room knows only as a RoomHost; a socket
is a peer.Peer.)

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
- Editors' awareness (cursors, names, colours: awareness.py) is relayed to the room's other peers and
  over the bus to the page's rooms elsewhere, never stored; a peer that leaves or goes silent has its
  states removed with a null-state update to everyone.
- Each room announces its own viewers on the channel when they change and again every
  `notebook_viewers_refresh_seconds`; other processes' announcements expire after three intervals,
  so a process that dies without saying goodbye leaves no ghost viewers behind.
- A live document stays within MAX_PAGE_CHARS characters (peer.ContentCap): an update that
  would pass it is not applied, relayed or saved; its sender gets an `error` frame and close 1009.
"""
from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from datetime import datetime, timedelta
from typing import Any, Callable, Protocol

from pycrdt import Doc, Text

from ...domain import notebook as pages
from ...domain.visibility import can_see, is_owner
from ...errors import log_background_failure
from ...events.bus import Bus
from ...events.channels import NOTEBOOK, NotebookPayload, RoomMeta
from .awareness import InvalidAwareness, RoomAwareness
from .peer import (CLOSE_INVALID_DATA, CLOSE_NOT_FOUND, CLOSE_TOO_BIG, TOO_BIG_MESSAGE, ContentCap, Peer,
                   awareness_frame, frame, update_frame)

log = logging.getLogger("coord.notebook")

SAVE_RETRY_SECONDS = 2.0


class RoomHost(Protocol):
    """What a room needs of whoever keeps it (rooms.NotebookRooms): the process's services, its timings,
    and to be told when the room goes idle or has an update for the other processes."""

    coord: Any  # spawn, now, store
    bus: Bus
    env_admins: frozenset[str]

    @property
    def save_seconds(self) -> float: ...

    @property
    def unload_seconds(self) -> float: ...

    @property
    def awareness_timeout_seconds(self) -> float: ...

    def room_idle(self, room: Room) -> None: ...

    def unload_if_idle(self, room: Room) -> None: ...

    def publish_update(self, room: Room, update: bytes) -> None: ...


class Room:
    def __init__(self, manager: RoomHost, page_id: str, state: bytes, meta: RoomMeta):
        self.manager = manager
        self.page_id = page_id
        self.origin = uuid.uuid4().hex
        self.doc: Doc = pages.load_document(state)
        self.text: Text = self.doc.get(pages.TEXT_NAME, type=Text)
        self.cap = ContentCap()
        self.meta = meta
        self.peers: set[Peer] = set()
        self.remote_viewers: dict[str, tuple[list[str], datetime]] = {}  # origin -> (names, heard at)
        self.version = 0          # bumped by every change to the document
        self.saved_version = 0
        self.editors: dict[str, int] = {}  # identity -> version of their latest unsaved edit
        self.awareness = RoomAwareness(manager.awareness_timeout_seconds)
        self._save_lock = asyncio.Lock()
        self._save_timer: asyncio.TimerHandle | None = None
        self._unload_timer: asyncio.TimerHandle | None = None
        self.unsubscribe: Callable[[], None] = manager.bus.subscribe(NOTEBOOK.of(page_id), self.on_bus)
        # A room opening here has heard none of the cursors set before: the page's rooms elsewhere say them again.
        opened: NotebookPayload = {"kind": "awareness_query", "origin": self.origin}
        manager.bus.publish(NOTEBOOK.of(page_id), opened)

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
        everyone = self.awareness.everyone()
        if everyone is not None:
            peer.send(awareness_frame(everyone))
        self._viewers_changed()

    def leave(self, peer: Peer) -> None:
        if peer not in self.peers:
            return
        self.peers.discard(peer)
        removal = self.awareness.drop_sender(peer)
        if removal is not None:
            self._relay_awareness(removal)
        self._viewers_changed()
        if not self.peers:
            self.manager.room_idle(self)

    def viewers(self) -> list[str]:
        names = {p.identity for p in self.peers}
        for remote, _heard in self.remote_viewers.values():
            names.update(remote)
        return sorted(names)

    def _viewers_changed(self) -> None:
        self.send_to_peers(frame("viewers", viewers=self.viewers()))
        self.announce_viewers()

    def announce_viewers(self) -> None:
        """Tell the page's rooms in other processes who is here."""
        viewers: NotebookPayload = {
            "kind": "viewers", "origin": self.origin, "viewers": sorted({p.identity for p in self.peers})}
        self.manager.bus.publish(NOTEBOOK.of(self.page_id), viewers)

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
            self.send_to_peers(frame("viewers", viewers=viewers))

    def send_to_peers(self, text: str, exclude: Peer | None = None) -> None:
        for peer in list(self.peers):
            if peer is not exclude:
                peer.send(text)

    # --- edits -------------------------------------------------------------------------------
    def receive(self, peer: Peer, update: bytes) -> None:
        """A peer's update: refused on a read-only page, else applied, relayed and published."""
        if peer.closing:
            return  # e.g. its token was just revoked: nothing more from it is applied
        if not self.may_edit(peer):
            peer.send(self.readonly_frame())
            return
        if not self.cap.admits(self.doc, self.text, update):
            peer.close(CLOSE_TOO_BIG, TOO_BIG_MESSAGE)
            return
        try:
            self.doc.apply_update(update)
        except BaseException as exc:  # pycrdt reports malformed updates as a Rust panic (BaseException)
            if isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
                raise
            peer.close(CLOSE_INVALID_DATA, "Invalid Yjs update")
            return
        self._changed(peer.identity)
        self.send_to_peers(update_frame(update), exclude=peer)
        self.manager.publish_update(self, update)

    # --- awareness (cursors; relayed, never stored) --------------------------------------------
    def receive_awareness(self, peer: Peer, update: bytes) -> None:
        if peer.closing:
            return
        try:
            applied = self.awareness.apply(peer, update)
        except InvalidAwareness as exc:
            peer.close(CLOSE_INVALID_DATA, str(exc))
            return
        if applied:
            self._relay_awareness(update, exclude=peer)

    def _relay_awareness(self, update: bytes, exclude: Peer | None = None) -> None:
        self.send_to_peers(awareness_frame(update), exclude=exclude)
        payload: NotebookPayload = {"kind": "awareness", "origin": self.origin,
                                    "update": base64.b64encode(update).decode()}
        self.manager.bus.publish(NOTEBOOK.of(self.page_id), payload)

    def drop_silent_awareness(self) -> None:
        """Each process drops the states it has not heard renewed (so a dead process's editors go too)."""
        removal = self.awareness.drop_silent()
        if removal is not None:
            self.send_to_peers(awareness_frame(removal))

    def merge_content(self, content: str, base: bytes | None) -> None:
        """A REST PATCH of content, as a diff: peers get an update and keep their own edits."""
        update = pages.merge_text_from(self.doc, base, content)
        if update is None:
            return
        self.cap.grew(update)
        self.version += 1  # the PATCH logged its own event, so this edit names no editor
        self.schedule_save()
        self.send_to_peers(update_frame(update))
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
        self.cap.grew(update)
        if bump:
            self.version += 1
            self.schedule_save()
        self.send_to_peers(update_frame(update))

    def _changed(self, identity: str) -> None:
        self.version += 1
        self.editors.pop(identity, None)
        self.editors[identity] = self.version
        self.schedule_save()

    # --- bus ---------------------------------------------------------------------------------
    def on_bus(self, payload: NotebookPayload) -> None:
        if payload.get("origin") == self.origin:
            return
        kind = payload.get("kind")
        if kind == "update":
            if "relay" in payload:
                self.manager.coord.spawn(self._apply_relay(payload["relay"]), "notebook-relay")
            else:
                self.apply_remote(base64.b64decode(payload["update"]))
        elif kind == "meta":
            self.set_meta({"createdBy": payload["createdBy"], "taggedUsers": payload["taggedUsers"],
                           "locked": payload["locked"], "lockedBy": payload["lockedBy"],
                           "archived": payload["archived"]})
        elif kind == "awareness":
            update = base64.b64decode(payload["update"])
            try:
                applied = self.awareness.apply(payload["origin"], update)
            except InvalidAwareness:
                log.warning("ignoring an invalid awareness update for page %s from the bus", self.page_id)
                return
            if applied:
                self.send_to_peers(awareness_frame(update))
        elif kind == "awareness_query":
            ours = self.awareness.of_senders(list(self.peers))
            if ours is not None:
                answer: NotebookPayload = {"kind": "awareness", "origin": self.origin,
                                           "update": base64.b64encode(ours).decode()}
                self.manager.bus.publish(NOTEBOOK.of(self.page_id), answer)
        elif kind == "viewers":
            before = self.viewers()
            origin = payload["origin"]
            assert origin is not None  # viewers are told by a room (announce_viewers)
            if payload["viewers"]:
                self.remote_viewers[origin] = (payload["viewers"], self.manager.coord.now())
            else:
                self.remote_viewers.pop(origin, None)
            self._tell_viewers_if_changed(before)

    async def _apply_relay(self, relay_id: int) -> None:
        update = await self.manager.coord.store.read(pages.load_relay, relay_id)
        if update is not None:
            self.apply_remote(update)

    def set_meta(self, meta: RoomMeta) -> None:
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
