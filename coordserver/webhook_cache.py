"""Which buzz webhook an ingest URL names, from a per-process cache: a refusal costs no database work.

An ingest (`POST /api/ingest/<appName>/<token>`) carries its credential in the URL, and anyone may post to
any URL: a wrong token, a disabled webhook or an unknown app name is answered 404 from memory here, before
any unit of work. A matching webhook's id goes on to the ingest unit, which reads the row again (locked,
every column) and checks the token once more, so an answer never rests on a stale entry alone.

Entries are per app name (every webhook of it: id, token, enabled), read in a read unit on a miss. Every
unit that creates, changes or deletes a webhook announces it after its commit (bus `webhooks`,
domain/buzz.py): this process drops the whole cache before that unit's caller hears back, the others when
the NOTIFY arrives (milliseconds later); a bus reconnect (announcements may have been missed) drops it too.
A lookup that was running while a drop happened does not file what it read.
"""
from __future__ import annotations

import hmac
from typing import Callable

from . import db
from .errors import NotFound
from .events.channels import BUS, WEBHOOKS

MAX_APP_NAMES = 10_000  # unknown names are kept too (a scan of guessed URLs): past this, start again
_BY_APP_NAME = "SELECT id, token, enabled FROM buzz_webhook WHERE app_name = ?"

Entry = tuple[tuple[int, bytes, bool], ...]  # (id, token, enabled) of each webhook of one app name


def _webhooks_named(app_name: str) -> Entry:
    """A read unit: every webhook of that app name (fixed SQL: the hot path)."""
    return tuple((int(row[0]), str(row[1]).encode(), bool(row[2])) for row in db.sql_rows(_BY_APP_NAME, (app_name,)))


def matching(entry: Entry, token: str) -> int | None:
    """The enabled webhook whose token is `token`, compared in constant time against each one."""
    given, found = token.encode(), None
    for webhook_id, webhook_token, enabled in entry:
        if hmac.compare_digest(webhook_token, given) and enabled:
            found = webhook_id
    return found


class WebhookCache:
    def __init__(self, coord):
        self.coord = coord
        self._entries: dict[str, Entry] = {}
        self._generation = 0
        self._unsubscribe: list[Callable[[], None]] = []
        self.hits = self.misses = 0

    async def start(self) -> None:
        bus = self.coord.bus
        self._unsubscribe = [bus.subscribe(WEBHOOKS, lambda _payload: self.forget_all()),
                             bus.subscribe(BUS, lambda _payload: self.forget_all())]

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self.forget_all()

    def forget_all(self) -> None:
        self._generation += 1
        self._entries.clear()

    async def webhook_id(self, app_name: str, token: str) -> int:
        """The id of the enabled webhook this ingest URL names; NotFound("Invalid webhook") otherwise."""
        entry = self._entries.get(app_name)
        if entry is None:
            self.misses += 1
            generation = self._generation
            entry = await self.coord.store.read(_webhooks_named, app_name)
            if generation == self._generation:  # no drop while it was read
                if len(self._entries) >= MAX_APP_NAMES:
                    self._entries.clear()
                self._entries[app_name] = entry
        else:
            self.hits += 1
        found = matching(entry, token)
        if found is None:
            raise NotFound("Invalid webhook")
        return found
