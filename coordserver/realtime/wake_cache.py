"""Serving GET /api/wake (and the admin view) from a per-identity cache of its gathered sources.

A wake with 1,000 unread messages cost ~4 ms of CPU, nearly all of it reading and shaping the same
rows again. Here each identity's gathered sources (domain/wake.Gathered) are kept between requests
and reused while nothing they depend on can have changed; what depends on the clock (ages, the
timestamp, backup alerts) is rendered per request from them.

A kept entry is dropped, or not reused, when:
- a logged event addressed to the identity or to everyone committed, in any process: every read
  checks wake_version (one indexed statement) against the entry's, so new sources that log their
  changes are covered without further work;
- an unlogged announcement (bus `ephemeral` with the identity or everyone in `to`, `wake`,
  `wake_changed`) names the identity or everyone, from this process or another (PostgresBus);
- a unit committed in this process that announced nothing at all (a direct write), unless it is one
  of the background units known to leave every wake alone (WAKE_NEUTRAL): all entries go;
- the clock passes the entry's expiry (a task's on_or_after_at, a work-hours boundary) or goes back.
Every entry is computed in a read unit that starts after the generation it is filed under was taken,
so an invalidation that lands while it is computed keeps it from being filed.

An entry also keeps its rendered payload (all but the timestamp) while no event has been logged
anywhere since it was rendered (bus `events`, local commits and, with PostgreSQL, other processes'
through LISTEN/NOTIFY) and until the clock reaches the next instant it changes by itself (an item's
age text moves on, a task's on_or_after_at, a work-hours boundary). Such a wake touches neither the
database nor a thread: it costs what the bare app's request costs. Logged changes made by another
process show once its NOTIFY arrives here (milliseconds); until then the rendering is the one from
just before. Backup alerts depend on presence and other identities: a backup agent's wake is
rendered per request, as are wakes that deliver buzz items.

Buzz items are one-shot: a wake that holds any goes through a write unit that marks them delivered
(and announces `wake_changed`), exactly as without the cache.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Mapping

from .. import db, jsonstrict
from ..domain import wake
from ..timeutil import iso
from ..events.channels import BUS, EPHEMERAL, EVENTS, WAKE, WAKE_CHANGED
from .kept import KeptPerIdentity

# An entry holds up to 250 items (with their encoded text): ~100 KB at most. The least recently used
# go first; 1,000 identities asking in turn is far more than one coordserver serves.
MAX_ENTRIES = 1_000
_TIMESTAMP = ',"timestamp":'


@dataclass(frozen=True)
class Rendered:
    """A payload's text up to its timestamp, right from `since` until `until` while `log` (the cache's
    count of logged events heard) stays the same."""
    log: int
    head: str
    since: datetime
    until: datetime | None
    has_buzz: bool

    def serves(self, log: int, now: datetime, deliver: bool) -> bool:
        return (log == self.log and self.since <= now and (self.until is None or now < self.until)
                and not (deliver and self.has_buzz))


class WakeCache(KeptPerIdentity):
    def __init__(self, coord):
        super().__init__(coord)
        self._entries: OrderedDict[tuple[str, bool], tuple[tuple, wake.Gathered, Rendered | None]] = OrderedDict()
        self._log = 0  # logged events heard (bus `events`, from this process or another)
        self.hits = self.misses = 0
        self.rendered_hits = 0  # of the hits, those served without the database

    # invalidation (all on the event loop)
    def subscriptions(self) -> list:
        return [(EPHEMERAL, self._on_ephemeral), (WAKE, self.forget_named), (EVENTS, self._on_events),
                (WAKE_CHANGED, self.forget_named), (BUS, self.forget_all)]

    def dropped(self, identity: str | None) -> None:
        if identity is None:
            self._entries.clear()
        else:
            for key in ((identity, False), (identity, True)):
                self._entries.pop(key, None)

    def _on_events(self, _payload: dict) -> None:
        self._log += 1

    def _on_ephemeral(self, payload: dict) -> None:
        if isinstance(payload, dict) and not _leaves_wakes_alone(payload):
            self.forget_audience(payload)

    def heard_write(self, fn: Callable, announced: bool) -> None:
        if not announced and fn not in WAKE_NEUTRAL:
            self.forget_all()

    def _stamp(self, identity: str) -> tuple[int, int]:
        return self.generation(identity)

    # serving
    async def payload(self, identity: str, include_off_hours: bool, deliver: bool,
                      seen: Callable[[], Mapping[str, datetime]]) -> str:
        """The identity's WakePayload as compact JSON text; with `deliver` (its own GET /api/wake) buzz
        items in it are marked delivered, in a write unit, as wake.wake_payload does. `seen` gives the
        presence snapshot, asked for only when the sources are read."""
        c = self.coord
        key, stamp, log = (identity, include_off_hours), self._stamp(identity), self._log
        held = self._entries.get(key)
        if held is not None and held[0] == stamp:
            now = c.store.clock.now()
            if held[2] is not None and held[2].serves(log, now, deliver):
                self.hits += 1
                self.rendered_hits += 1
                self._entries.move_to_end(key)
                return f'{held[2].head}{_TIMESTAMP}"{iso(now)}"}}'
        cached = held[1] if held and held[0] == stamp else None
        body, gathered, rendered = await c.store.read(_read, identity, c.settings.base_url, include_off_hours,
                                                      cached, seen(), log)
        if gathered is cached:
            self.hits += 1
        else:
            self.misses += 1
        if deliver and gathered.has_buzz:
            self._entries.pop(key, None)
            return jsonstrict.dumps(await c.store.write(wake.wake_payload, identity, c.settings.base_url,
                                                        include_off_hours, True, c.env_identities, seen()))
        if self._stamp(identity) == stamp:
            self._entries[key] = (stamp, gathered, rendered)
            self._entries.move_to_end(key)
            if len(self._entries) > MAX_ENTRIES:
                self._entries.popitem(last=False)
        return body


def _read(identity: str, base_url: str, include_off_hours: bool, cached: wake.Gathered | None,
          seen: Mapping[str, datetime], log: int) -> tuple[str, wake.Gathered, Rendered | None]:
    """The read unit behind a wake the cache could not answer alone: the payload, the sources it came
    from and, unless it holds backup alerts (presence and other identities decide those), its
    rendering for reuse."""
    now = db.now()
    body, gathered, is_backup = wake.cached_payload(identity, base_url, include_off_hours, cached, seen, now)
    if is_backup:
        return body, gathered, None
    cut = body.rindex(_TIMESTAMP)
    until = min([t for t in (gathered.expires_at, wake.ages_change_at(gathered, now)) if t is not None],
                default=None)
    return body, gathered, Rendered(log, body[:cut], now, until, gathered.has_buzz)


# Unlogged announcements that change no wake: typing, presence (backup alerts, the one source presence
# moves, are computed per request) and wake pulses themselves. (An inbox read or search is not on this
# channel at all: STREAM_HINTS.)
_NEUTRAL_EPHEMERAL = frozenset({"presence", "chat_typing", "wake_pulse"})


def _leaves_wakes_alone(payload: dict) -> bool:
    return payload.get("type") in _NEUTRAL_EPHEMERAL


def _neutral_units() -> frozenset[Callable]:
    """Background units that write often and never change what any wake shows."""
    from ..domain import alert_tallies, alerts, asks, identities
    from ..events import log as event_log
    from ..realtime import presence, webhook_delivery as push
    return frozenset({push.feed, push.claim_due, push.record_outcome, push.prune_finished, push.ensure_cursor,
                      identities.touch_token, presence._persist, event_log.prune,
                      *SCHEDULED_PASSES,
                      # marks buzz delivered; announces wake_changed itself when it marked any
                      wake.wake_payload,
                      # moves pending firings into their alerts' rows: every read counted them already
                      alert_tallies.fold})


def _scheduled_passes() -> frozenset[Callable]:
    """The timers' passes (scheduler.py, notebook history), each run every interval on every process, most
    finding nothing due. A pass logs (so announces) each change it makes to what a wake or an inbox shows: the
    task a template makes, the lease or reservation that ran out, the ask that expired, the alert unsnoozed or
    escalated, the guard cleared; the rest it writes (a template's next run, old notebook versions) no wake
    or inbox shows. Without this every kept wake and inbox page went at each pass."""
    from ..domain import alerts, asks, guards, lease_changes, notebook_versions, recurring, reservations
    return frozenset({recurring.run_due, asks.expire_due, alerts.unsnooze_due, alerts.escalate_due,
                      guards.clear_due, lease_changes.expire_due, reservations.expire_due,
                      notebook_versions.prune})


SCHEDULED_PASSES = _scheduled_passes()
WAKE_NEUTRAL = _neutral_units()
