"""Waiting for an ask to change, in any process: MCP's `ask_human` blocks on it (mcp/tools.py).

Every change of an ask is announced on the bus (ASKS, published after its unit commits: from this
process at once, from another through PostgreSQL's LISTEN/NOTIFY). A waiter registers the ask's id
*before* reading the ask, so a change that commits between the read and the wait still wakes it; it
then reads the ask again (the announcement only says that something changed). When the bus listens
again after losing its connection, announcements may have been missed: every waiter is woken to re-read.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

from ..events.channels import ASKS, BUS, AsksPayload


class AskWaiters:
    """coord.services.asks: who in this process waits on which ask."""

    def __init__(self, coord: Any) -> None:
        self.coord = coord
        self._waiting: dict[int, set[asyncio.Event]] = {}
        self._unsubscribe: list[Callable[[], None]] = []

    async def start(self) -> None:
        bus = self.coord.bus
        self._unsubscribe = [bus.subscribe(ASKS, self._on_ask), bus.subscribe(BUS, lambda _payload: self._wake_all())]

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        self._wake_all()

    @contextmanager
    def watch(self, ask_id: int) -> Iterator[asyncio.Event]:
        """An event set when ask `ask_id` may have changed. Clear it before each read of the ask."""
        changed = asyncio.Event()
        self._waiting.setdefault(ask_id, set()).add(changed)
        try:
            yield changed
        finally:
            waiting = self._waiting.get(ask_id)
            if waiting is not None:
                waiting.discard(changed)
                if not waiting:
                    del self._waiting[ask_id]

    def waiting(self) -> int:
        return sum(len(events) for events in self._waiting.values())

    def _on_ask(self, payload: AsksPayload) -> None:
        ask_id = payload.get("askId") if isinstance(payload, dict) else None
        for changed in self._waiting.get(ask_id, ()) if isinstance(ask_id, int) else ():
            changed.set()

    def _wake_all(self) -> None:
        for events in self._waiting.values():
            for changed in events:
                changed.set()
