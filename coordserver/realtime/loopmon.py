"""Event-loop lag: sleep a fixed interval and measure how late the loop wakes us (shown by doctor)."""
from __future__ import annotations

import asyncio
import time
from collections import deque

WINDOW_SECONDS = 60.0


class LoopMonitor:
    def __init__(self, coord, interval: float = 0.5, monotonic=time.monotonic):
        self.coord = coord
        self.interval = interval
        self._monotonic = monotonic
        self.samples: deque[tuple[float, float]] = deque()  # (when, lag seconds)

    async def start(self) -> None:
        self.coord.spawn(self._run(), "loopmon")

    async def stop(self) -> None:
        return None

    def record(self, lag: float) -> None:
        now = self._monotonic()
        self.samples.append((now, max(0.0, lag)))
        while self.samples and now - self.samples[0][0] > WINDOW_SECONDS:
            self.samples.popleft()

    def stats(self) -> dict:
        """Lag over the last minute, in milliseconds."""
        lags = [lag for _, lag in self.samples]
        if not lags:
            return {"samples": 0, "maxMs": None, "avgMs": None, "lastMs": None}
        return {"samples": len(lags), "maxMs": round(max(lags) * 1000, 1),
                "avgMs": round(sum(lags) / len(lags) * 1000, 1), "lastMs": round(lags[-1] * 1000, 1)}

    async def _run(self) -> None:
        while True:
            started = self._monotonic()
            await asyncio.sleep(self.interval)
            self.record(self._monotonic() - started - self.interval)
