"""The recurring-task scheduler: a background service that runs due templates every
`settings.scheduler_interval_seconds` (and at start, so downtime is caught up at once).

Safe with several processes on one database: each instant's task is guarded by a unique key, so
concurrent passes never create a duplicate. Doctor reads `last_tick_at`, `last_lag_seconds` and
`overdue_templates()`.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from .domain import recurring
from .errors import log_background_failure
from .timeutil import from_db

log = logging.getLogger("coord.scheduler")


class Scheduler:
    def __init__(self, coord):
        self.coord = coord
        self.last_tick_at: datetime | None = None  # the injected clock's time of the last finished pass
        self.last_lag_seconds: float = 0.0  # how late the most overdue instant of that pass was handled
        self._task: asyncio.Task | None = None

    @property
    def interval(self) -> float:
        return self.coord.settings.scheduler_interval_seconds

    def lag_seconds(self, now: datetime) -> float | None:
        """Time since the last pass minus the interval (admin doctor and coord_scheduler_lag_seconds):
        above 0 when a pass is overdue; None before the first pass."""
        if self.last_tick_at is None:
            return None
        return (now - from_db(self.last_tick_at)).total_seconds() - self.interval

    async def start(self) -> None:
        self._task = self.coord.spawn(self._run(), "scheduler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def tick(self) -> dict:
        """Run one pass now. Returns {"created": n, "errors": m}."""
        result = await self.coord.store.write_alone(recurring.run_due)
        self.last_tick_at = self.coord.clock.now()
        self.last_lag_seconds = result["lagSeconds"]
        return {"created": result["created"], "errors": result["errors"]}

    async def overdue_templates(self) -> dict:
        """Templates late enough that the scheduler is not keeping up (or failing): {"overdue", "examples"}."""
        return await self.coord.store.read(recurring.overdue, self.coord.clock.now(), self.interval)

    async def _run(self) -> None:
        stopping = self.coord.shutting_down
        while not stopping.is_set():
            try:
                await self.tick()
            except Exception:
                log_background_failure(log, "scheduler pass failed")
            try:
                await asyncio.wait_for(stopping.wait(), timeout=self.interval)
            except asyncio.TimeoutError:
                pass
