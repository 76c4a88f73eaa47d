"""The per-app context: settings, storage, bus, clock, background tasks and the typed services."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from quart import current_app

from .db import Store
from .events.bus import Bus
from .netcheck import Resolver, system_resolver
from .settings import Settings
from .timeutil import Clock

if TYPE_CHECKING:
    from .services import Services

log = logging.getLogger("coord")

Worker = Callable[["Coord"], Awaitable[None]]


@dataclass
class Coord:
    settings: Settings
    store: Store
    bus: Bus
    clock: Clock
    started_monotonic: float = field(default_factory=time.monotonic)
    shutting_down: asyncio.Event | None = None
    # Set once by create_app (services.build); reading it before then is an AttributeError.
    services: Services = field(init=False, repr=False)
    resolver: Resolver = system_resolver  # DNS for webhook targets; tests replace it
    _tasks: set[asyncio.Future[Any]] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not isinstance(self.bus, Bus):
            raise TypeError(f"coord.bus must be a Bus, not {type(self.bus).__name__}")

    @cached_property
    def env_identities(self) -> frozenset[str]:
        return frozenset(t.identity for t in self.settings.env_tokens.values())

    @cached_property
    def env_admins(self) -> frozenset[str]:
        return frozenset(t.identity for t in self.settings.env_tokens.values() if t.is_admin)

    def now(self) -> datetime:
        return self.clock.now()

    def spawn(self, coro: Awaitable[Any], name: str | None = None) -> asyncio.Future[Any]:
        """A background task whose failure is logged, not lost; cancelled at shutdown."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Future[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background task %s failed", name or t, exc_info=t.exception())
        task.add_done_callback(done)
        return task

    async def cancel_tasks(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def coord() -> Coord:
    return current_app.extensions["coord"]
