"""Page history in the background (coord.services.history): the timed versions pass and the pruning of
old versions (domain/notebook_versions.py holds the rules).

Every process runs the pass, as every process runs the scheduler: each version is made in a unit that
holds the page row and checks again whether one is due, so one version is made however many processes
look. Time is the injected clock's (coord.now), so tests advance it instead of waiting."""
from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from ...domain import notebook_versions as versions
from ...errors import log_background_failure

log = logging.getLogger("coord.notebook")

PRUNE_INTERVAL_SECONDS = 3600.0


class PageHistory:
    def __init__(self, coord, env_admins: frozenset[str]):
        self.coord = coord
        self.env_admins = env_admins
        self._tasks: list[asyncio.Future] = []

    @property
    def interval(self) -> timedelta:
        return timedelta(seconds=self.coord.settings.notebook_version_seconds)

    async def start(self) -> None:
        self._tasks = [self.coord.spawn(self._every(self.coord.settings.notebook_version_check_seconds,
                                                    self.make_due_versions), "notebook-versions"),
                       self.coord.spawn(self._every(PRUNE_INTERVAL_SECONDS, self.prune), "notebook-versions-prune")]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def make_due_versions(self) -> int:
        """One pass: a version of every page that changed and whose newest version is old enough."""
        page_ids = await self.coord.store.read(versions.pages_with_pending_edits)
        made = 0
        for page_id in page_ids:
            made += bool(await self.coord.store.write(versions.version_if_due, page_id, self.interval,
                                                      self.env_admins))
        return made

    async def prune(self) -> int:
        retention = timedelta(days=self.coord.settings.notebook_version_retention_days)
        removed = await self.coord.store.write_until_done(versions.prune, retention)
        if removed:
            log.info("pruned %d notebook page versions older than %s", removed, retention)
        return removed

    async def _every(self, seconds: float, job) -> None:
        stopping = self.coord.shutting_down
        while not stopping.is_set():
            try:
                await job()
            except Exception:
                log_background_failure(log, "notebook page history: %s failed", job.__name__)
            try:
                await asyncio.wait_for(stopping.wait(), timeout=seconds)
            except asyncio.TimeoutError:
                pass
