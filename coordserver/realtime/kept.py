"""What the caches of per-identity answers share (wake_cache.py, inbox_cache.py).

An answer is read under a generation: the cache's own, bumped for every identity at once, and the identity's.
It is reused only while both are as they were, so a change heard while it is read keeps it from being filed.
The bus and the store bump them; each cache says which channels and which committed units mean what.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable

from ..events.channels import Channel

Generation = tuple[int, int]


class KeptPerIdentity(ABC):
    def __init__(self, coord: Any):
        self.coord = coord
        self._generation = 0  # bumped for every identity at once
        self._identity_generation: dict[str, int] = {}
        self._unsubscribe: list[Callable[[], None]] = []

    # what each cache says
    @abstractmethod
    def subscriptions(self) -> list[tuple[Channel[Any], Callable[[Any], None]]]:
        """The bus channels whose payloads change kept answers, each with the handler that forgets them."""

    @abstractmethod
    def heard_write(self, fn: Callable[..., Any], announced: bool) -> None:
        """A unit committed in this process (store.on_write): `announced`, whether it logged or published."""

    @abstractmethod
    def dropped(self, identity: str | None) -> None:
        """Let go of the answers kept for `identity` (None: every identity's)."""

    # shared
    async def start(self) -> None:
        bus = self.coord.bus
        self._unsubscribe = [bus.subscribe(channel, callback) for channel, callback in self.subscriptions()]
        self.coord.store.on_write.append(self.heard_write)

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        if self.heard_write in self.coord.store.on_write:
            self.coord.store.on_write.remove(self.heard_write)
        self.forget_all()

    def forget(self, identity: str) -> None:
        self._identity_generation[identity] = self._identity_generation.get(identity, 0) + 1
        self.dropped(identity)

    def forget_all(self, _payload: object = None) -> None:
        self._generation += 1
        self._identity_generation.clear()
        self.dropped(None)

    def forget_named(self, payload: Any) -> None:
        """A payload naming one `identity` (None, or none at all: everyone's)."""
        identity = payload.get("identity") if isinstance(payload, dict) else None
        if isinstance(identity, str):
            self.forget(identity)
        else:
            self.forget_all()

    def forget_audience(self, payload: Any) -> None:
        """A payload addressed `to` a list of identities (None: everyone)."""
        to = payload.get("to") if isinstance(payload, dict) else None
        if to is None:
            self.forget_all()
        elif isinstance(to, list):
            for identity in to:
                if isinstance(identity, str):
                    self.forget(identity)

    def generation(self, identity: str) -> Generation:
        return self._generation, self._identity_generation.get(identity, 0)
