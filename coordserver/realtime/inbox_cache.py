"""Serving inbox pages (GET /api/mailboxes/me/messages) from kept answers while nothing they show can have changed.

Agents poll their inbox far more often than it changes. A page of 50 messages with 1,000 unread costs the
database a count and 51 rows' JSON on every request (on PostgreSQL ~0.5 ms of its CPU, bench/RESULTS.md); a
kept page costs what the bare app's request costs.

A kept page is exact, never a moment behind, because it is only kept while this process is the only server
on its database (`bus.solitude()`, events/bus.py): every write then is one of this process's own units, and
each is heard here on the event loop before its caller hears that it committed (db.Store._finish). With
another server on the database nothing is kept and every page is read, as before; a kept page is served only
under the solitude it was read in.

A kept page of an identity is dropped when:
- one of its messages changed: a message stored for it (its wake hears of it: bus `wake` or `wake_changed`
  with the identity), read or acknowledged (`ephemeral` inbox_check to it), or marked pending (`wake_changed`);
  these come from the message units (INBOX_ANNOUNCED) and name whose inbox they changed;
- any other unit commits, unless it is one known to leave every inbox alone (INBOX_NEUTRAL): all pages go. So
  a unit that changes what a page shows without being one of the message units (a sender becoming an agent
  changes `fromIsAgent`) is covered without naming it here;
- the bus lost notices (`bus` reconnected), or solitude ended.
Every page is read in a unit that starts after the generation it is filed under was taken, so a write that
commits while it is read keeps it from being filed.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from ..domain import messages
from ..events.channels import BUS, EPHEMERAL, STREAM_HINTS, WAKE, WAKE_CHANGED, Channel
from .kept import KeptPerIdentity

MAX_ENTRIES = 1_000
MAX_CHARACTERS = 32 * 1024 * 1024  # a page of 50 messages of the longest bodies is a few MB; most are ~30 KB

# (identity, status, limit, cursor): the page's query.
Key = tuple[str, str | None, int, str | None]


class InboxCache(KeptPerIdentity):
    def __init__(self, coord: Any):
        super().__init__(coord)
        self._pages: OrderedDict[Key, tuple[tuple[int, int, int], str]] = OrderedDict()
        self._characters = 0
        self.hits = self.misses = 0

    # invalidation (all on the event loop)
    def subscriptions(self) -> list[tuple[Channel[Any], Callable[[Any], None]]]:
        return [(WAKE, self.forget_named), (WAKE_CHANGED, self.forget_named), (EPHEMERAL, self.forget_audience),
                (BUS, self.forget_all)]

    def dropped(self, identity: str | None) -> None:
        if identity is None:  # one identity's pages are not reused (their generation moved on) and age out
            self._pages.clear()
            self._characters = 0

    def heard_write(self, fn: Callable[..., Any], _announced: bool) -> None:
        if fn not in INBOX_ANNOUNCED and fn not in INBOX_NEUTRAL:
            self.forget_all()

    def _stamp(self, identity: str) -> tuple[int, int, int] | None:
        solitude = self.coord.bus.solitude()
        if solitude is None:
            return None
        return (solitude, *self.generation(identity))

    # serving
    async def page(self, identity: str, status: str | None, limit: int, cursor: str | None) -> str:
        """The inbox page's JSON text, as api/messages.inbox_json writes it."""
        key: Key = (identity, status, limit, cursor)
        stamp = self._stamp(identity)
        held = self._pages.get(key)
        if held is not None and stamp is not None and held[0] == stamp:
            self.hits += 1
            self._pages.move_to_end(key)
            # what the read unit would have announced: the caller's own streams show the read
            self.coord.bus.publish(STREAM_HINTS, messages.inbox_check_payload(identity, "list"))
            return held[1]
        self.misses += 1
        encoded, total, next_cursor = await self.coord.store.read(messages.inbox_page, identity, status, limit, cursor)
        tail = f',"nextCursor":"{next_cursor}"' if next_cursor else ""
        text = f'{{"messages":{encoded},"total":{total}{tail}}}'
        if stamp is not None and self._stamp(identity) == stamp and len(text) <= MAX_CHARACTERS // 8:
            self._keep(key, stamp, text)
        return text

    def _keep(self, key: Key, stamp: tuple[int, int, int], text: str) -> None:
        previous = self._pages.pop(key, None)
        if previous is not None:
            self._characters -= len(previous[1])
        self._pages[key] = (stamp, text)
        self._characters += len(text)
        while len(self._pages) > MAX_ENTRIES or self._characters > MAX_CHARACTERS:
            _key, (_stamp, dropped) = self._pages.popitem(last=False)
            self._characters -= len(dropped)


def _announced_units() -> frozenset[Callable[..., Any]]:
    """The units that change messages, each announcing whose inbox it changed (see the module's docstring).
    tests/server/api/test_inbox_cache.py drives each of them."""
    return frozenset({messages.send, messages.reply, messages.ack, messages.ack_many, messages.set_pending})


def _neutral_units() -> frozenset[Callable[..., Any]]:
    """Background units that write often and never touch a message or what a page derives from other tables."""
    from ..domain import alert_tallies, identities
    from ..domain import wake
    from ..events import log as event_log
    from ..realtime import presence, webhook_delivery as push
    from .wake_cache import SCHEDULED_PASSES
    return frozenset({push.feed, push.claim_due, push.record_outcome, push.prune_finished, push.ensure_cursor,
                      identities.touch_token, presence._persist, event_log.prune, wake.wake_payload,
                      alert_tallies.fold, *SCHEDULED_PASSES})


INBOX_ANNOUNCED = _announced_units()
INBOX_NEUTRAL = _neutral_units()
