"""Reading the event log in id order when ids may become visible out of order.

Event ids are allocated before commit. With one SQLite writer they appear in order; on PostgreSQL
with several writers id 11 can commit before id 10 (or 10 may never commit, when its unit rolled
back). A reader that advanced past a gap would lose id 10 for good: live streams, webhook pushes and
resumes (a client's Last-Event-ID would already be past it). So readers take only the contiguous
prefix and move past a gap only once it cannot fill any more:

- SQLite: once it has stayed open for GAP_GRACE_SECONDS (its one writer commits in order, so a gap
  is a rolled-back unit);
- PostgreSQL: once every transaction that was in progress while the gap was seen open has ended
  (pg_xact_status), however long that takes, up to GAP_GIVE_UP_SECONDS for a transaction that never
  ends. The statuses are checked before the rows are read, so an id committed by one of those
  transactions is among the rows.

A tracker serves one reader; its `read` runs inside a store unit (the database thread).
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Sequence, TypeVar

from .. import db

GAP_GRACE_SECONDS = 1.0
GAP_GIVE_UP_SECONDS = 120.0

log = logging.getLogger("coord")
Row = TypeVar("Row", bound=Sequence)


class GapTracker:
    def __init__(self, grace: float = GAP_GRACE_SECONDS, give_up: float = GAP_GIVE_UP_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.grace = grace
        self.give_up = give_up
        self.clock = clock
        self._first_seen: dict[int, float] = {}
        self._in_flight: set[int] = set()  # PostgreSQL: transactions in progress while a gap was open

    def read(self, after_id: int, read_rows: Callable[[], list[Row]]) -> tuple[list[Row], int]:
        """Reads rows (ascending ids, all > after_id) with `read_rows` and returns them with how many
        may be consumed now. Call inside a store unit."""
        postgres = not db.is_sqlite(db.current_database())
        settled = not postgres or not self._first_seen or self._settled()
        rows = read_rows()
        usable = self.usable(after_id, [row[0] for row in rows], settled)
        if postgres and self._first_seen:
            self._in_flight |= _running_transactions()
        return rows, usable

    def usable(self, after_id: int, ids: list[int], settled: bool = True) -> int:
        """How many of `ids` (ascending, all > after_id) may be consumed now. `settled`: no
        transaction that was running while a gap was open is running any more (always true on SQLite)."""
        expected = after_id + 1
        now = self.clock()
        for index, event_id in enumerate(ids):
            if event_id != expected:
                first = self._first_seen.setdefault(expected, now)
                waited = now - first
                if waited < self.grace or (not settled and waited < self.give_up):
                    self.forget_below(expected - 1)
                    return index
                if not settled:
                    log.warning("event ids %d..%d stayed unwritten for %.0f s while their transactions ran; "
                                "readers move past them", expected, event_id - 1, waited)
                self._first_seen.pop(expected, None)
            expected = event_id + 1
        self.forget_below(expected - 1)
        return len(ids)

    def waiting(self) -> bool:
        """True while a gap is being waited out (the caller should look again shortly)."""
        return bool(self._first_seen)

    def forget_below(self, event_id: int) -> None:
        for start in [s for s in self._first_seen if s <= event_id]:
            del self._first_seen[start]
        if not self._first_seen:
            self._in_flight.clear()

    def _settled(self) -> bool:
        if not self._in_flight:
            return True
        rows = db.sql_rows("SELECT x FROM unnest(?::text[]) AS x WHERE pg_xact_status(x::xid8) = 'in progress'",
                           ([str(xid) for xid in self._in_flight],))
        self._in_flight = {int(row[0]) for row in rows}
        return not self._in_flight


def _running_transactions() -> set[int]:
    """Transactions in progress now (PostgreSQL), this one excluded."""
    rows = db.sql_rows("SELECT x::text FROM pg_snapshot_xip(pg_current_snapshot()) AS x "
                       "WHERE x IS DISTINCT FROM pg_current_xact_id_if_assigned()")
    return {int(row[0]) for row in rows}
