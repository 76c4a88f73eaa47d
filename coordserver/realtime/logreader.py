"""Reading the event log in id order when ids may become visible out of order.

Event ids are allocated before commit. With one SQLite writer they appear in order; on PostgreSQL
with several writers id 11 can commit before id 10 (or 10 may never commit, when its unit rolled
back). A reader that advanced past a gap would lose id 10 for good, so readers take only the
contiguous prefix and skip a gap once it has stayed open for GAP_GRACE_SECONDS.
"""
from __future__ import annotations

import time

GAP_GRACE_SECONDS = 1.0


class GapTracker:
    def __init__(self, grace: float = GAP_GRACE_SECONDS):
        self.grace = grace
        self._first_seen: dict[int, float] = {}

    def usable(self, after_id: int, ids: list[int]) -> int:
        """How many of `ids` (ascending, all > after_id) may be consumed now."""
        expected = after_id + 1
        now = time.monotonic()
        for index, event_id in enumerate(ids):
            if event_id != expected:
                first = self._first_seen.setdefault(expected, now)
                if now - first < self.grace:
                    return index
                self._first_seen.pop(expected, None)
            expected = event_id + 1
        if len(self._first_seen) > 1000:
            self._first_seen.clear()
        return len(ids)

    def waiting(self) -> bool:
        """True while a gap is being waited out (the caller should look again shortly)."""
        return bool(self._first_seen)

    def forget_below(self, event_id: int) -> None:
        for start in [s for s in self._first_seen if s <= event_id]:
            del self._first_seen[start]
