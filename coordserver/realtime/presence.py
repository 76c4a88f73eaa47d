"""Presence: who was seen when, kept in memory on the hot path and persisted in the background.

`touch` is called for every authenticated request and by open streams; it never waits on the
database. Dirty entries are flushed every few seconds and at shutdown, so lastSeen survives restarts.
Each flush is also published on the bus (`presence_seen`): the other worker processes take the newer
times, so every worker answers presence for identities that talk to another one (within a flush).
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Callable

import peewee as pw

from .. import db
from ..errors import log_background_failure
from ..models import Message, Task, User
from ..timeutil import from_db, iso, parse_iso, to_db
from ..events.channels import EPHEMERAL, PRESENCE_SEEN

log = logging.getLogger("coord.presence")

ONLINE_WINDOW = timedelta(minutes=5)
FLUSH_SECONDS = 5.0
SEEN_PER_NOTICE = 40  # identities per `presence_seen` publish: one NOTIFY holds under 8,000 bytes


def _persist(seen: dict[str, tuple[datetime, str]]) -> None:
    from ..domain.identities import ensure_user
    # In identity order: another worker flushing an overlapping batch then takes the row locks in the
    # same order, instead of deadlocking against this one.
    for identity, (when, source) in sorted(seen.items()):
        if _update_seen(identity, when, source) or User.select().where(User.id == identity).exists():
            continue
        try:
            with User._meta.database.atomic():  # a savepoint: another worker may create the row first
                user = ensure_user(identity)
                user.last_seen_at, user.last_seen_source = to_db(when), source
                user.save()
        except pw.IntegrityError:
            _update_seen(identity, when, source)


def _update_seen(identity: str, when: datetime, source: str) -> int:
    return (User.update(last_seen_at=to_db(when), last_seen_source=source)
            .where((User.id == identity) & ((User.last_seen_at.is_null()) | (User.last_seen_at < to_db(when))))
            .execute())


def _load() -> dict[str, tuple[datetime, str]]:
    return {u.id: (from_db(u.last_seen_at), u.last_seen_source or "api")
            for u in User.select(User.id, User.last_seen_at, User.last_seen_source)
            .where(User.last_seen_at.is_null(False)) if u.last_seen_at is not None}  # (the query's own filter)


class PresenceTracker:
    def __init__(self, coord):
        self.coord = coord
        self.seen: dict[str, tuple[datetime, str]] = {}
        self.connections: dict[str, int] = {}  # open streams and notebook sockets: they keep one online
        self._dirty: dict[str, tuple[datetime, str]] = {}
        self._online: set[str] = set()
        self._unsubscribe: Callable[[], None] = lambda: None

    async def start(self) -> None:
        self.seen = await self.coord.store.read(_load)
        now = self.coord.now()
        self._online = {i for i, (when, _) in self.seen.items() if now - when < ONLINE_WINDOW}
        self._unsubscribe = self.coord.bus.subscribe(PRESENCE_SEEN, self._on_seen_elsewhere)
        self.coord.spawn(self._run(), "presence")

    async def stop(self) -> None:
        self._unsubscribe()
        await self.flush()

    def _on_seen_elsewhere(self, payload: dict) -> None:
        """Another process's flush: keep what is newer than ours. Its own online/offline
        announcements were made there; this process announces nothing for them."""
        for entry in payload.get("seen") or ():
            try:
                identity, when, source = entry[0], parse_iso(entry[1]), entry[2]
            except (TypeError, ValueError, IndexError):
                continue
            if not isinstance(identity, str) or not isinstance(source, str):
                continue
            mine = self.seen.get(identity)
            if mine is None or mine[0] < when:
                self.seen[identity] = (when, source)

    def touch(self, identity: str, source: str = "api", via: str | None = None) -> None:
        """A request or stream of `identity`; `via` ("mcp": the MCP endpoint) is said in the presence event
        announcing it online (ours, additive: v1's `source` is only "api" or "sse")."""
        now = self.coord.now()
        self.seen[identity] = (now, source)
        self._dirty[identity] = (now, source)
        if identity not in self._online:
            self._online.add(identity)
            self._announce(identity, True, via)

    def connection_opened(self, identity: str, source: str) -> None:
        """An event stream ("sse") or notebook socket ("api") opened: online while it stays open. Whether
        the identity has an event stream is the SSE hub's to say (`SSEHub.has_stream`), not presence's."""
        self.connections[identity] = self.connections.get(identity, 0) + 1
        self.touch(identity, source)

    def connection_closed(self, identity: str, source: str) -> None:
        count = self.connections.get(identity, 0) - 1
        if count > 0:
            self.connections[identity] = count
        else:
            self.connections.pop(identity, None)
        self.touch(identity, source)

    def is_online(self, identity: str) -> bool:
        if self.connections.get(identity):
            return True
        seen = self.seen.get(identity)
        return seen is not None and self.coord.now() - seen[0] < ONLINE_WINDOW

    def last_seen(self, identity: str) -> tuple[datetime, str] | None:
        return self.seen.get(identity)

    def snapshot(self) -> dict[str, datetime]:
        """Last-seen times as plain values, for domain code (backup alerts in wakes)."""
        return {identity: when for identity, (when, _source) in list(self.seen.items())}

    def _announce(self, identity: str, online: bool, via: str | None = None) -> None:
        seen = self.seen.get(identity)
        self.coord.bus.publish(EPHEMERAL, {"type": "presence", "to": None, "data": {
            "type": "presence", "identity": identity, "online": online,
            "lastSeen": iso(seen[0]) if seen else None, "source": seen[1] if seen else None,
            **({"via": via} if via else {})}})

    def sweep(self) -> None:
        """Announce identities that have gone quiet."""
        for identity in list(self._online):
            if not self.is_online(identity):
                self._online.discard(identity)
                self._announce(identity, False)

    async def flush(self) -> None:
        if not self._dirty:
            return
        batch, self._dirty = self._dirty, {}
        try:
            await self.coord.store.write(_persist, batch)
        except Exception:
            log_background_failure(log, "persisting presence failed; will retry")
            for identity, value in batch.items():
                self._dirty.setdefault(identity, value)
            return
        self._publish(batch)

    def _publish(self, batch: dict[str, tuple[datetime, str]]) -> None:
        entries = [[identity, iso(when), source] for identity, (when, source) in sorted(batch.items())]
        for start in range(0, len(entries), SEEN_PER_NOTICE):
            self.coord.bus.publish(PRESENCE_SEEN, {"seen": entries[start:start + SEEN_PER_NOTICE]})

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            self.sweep()
            await self.flush()


ACTIVE_TASK_STATUSES = ("ready", "in_progress", "review")


def presence_counts(env_identities: frozenset[str], viewer) -> tuple[set[str], dict[str, int], dict[str, int], set[str]]:
    """Identities that can act, unread mail per recipient, active tasks per assignee that `viewer`
    (a Principal) may see, and which of them are agents: five queries in all."""
    from ..domain.kinds import agents_among
    from ..domain.identities import actors
    from ..domain.project_access import task_visible
    unread: dict[str, int] = dict(db.tuples(Message.select(Message.recipient, pw.fn.COUNT(Message.id))
                                            .where(Message.status == "unread").group_by(Message.recipient)))
    tasks: dict[str, int] = dict(db.tuples(Task.select(Task.assignee_user_id, pw.fn.COUNT(Task.id))
                                           .where(Task.status.in_(ACTIVE_TASK_STATUSES)
                                                  & Task.assignee_user_id.is_null(False)
                                                  & task_visible(viewer.identity, viewer.is_admin))
                                           .group_by(Task.assignee_user_id)))
    can_act = actors(env_identities)
    return can_act, unread, tasks, agents_among(can_act)
