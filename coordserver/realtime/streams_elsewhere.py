"""Which identities hold an event stream on the other worker processes.

Each process's SSE hub knows only its own streams; wake pulses and fan-out need nothing more. What an
operator asks of the whole deployment (`GET /api/admin/user-stats`: is this identity reached over a
stream?) needs every worker's answer, so each hub tells the others on the bus (`streams`): an identity's
first stream opening and last one closing at once, and all of its identities again at every heartbeat.
A worker that dies says nothing more; what it said expires after EXPIRY_HEARTBEATS heartbeats.

The same knowledge spares the bus: an event only streams use (STREAM_HINTS: an inbox read) is NOTIFYed
only while another worker may hold a stream of its audience (`may_hold`). That answer is sure once every
other worker has refreshed since this one started listening (WARMUP_HEARTBEATS) and the bus has not
dropped a notice since (a reconnect starts the wait again); until then every such event is NOTIFYed.
"""
from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from typing import Callable, Iterable

from ..events.channels import BUS, STREAMS

PER_NOTICE = 200  # identities per publish: one NOTIFY stays well under its 8,000 bytes
EXPIRY_HEARTBEATS = 3
WARMUP_HEARTBEATS = 1.5  # every other worker has refreshed by then, however their heartbeats fall


class StreamsElsewhere:
    def __init__(self, bus, now: Callable[[], datetime], heartbeat_seconds: float):
        self.bus = bus
        self.now = now
        self.expiry = timedelta(seconds=heartbeat_seconds * EXPIRY_HEARTBEATS)
        self.warmup = timedelta(seconds=heartbeat_seconds * WARMUP_HEARTBEATS)
        self._sure_from: datetime | None = None  # when `may_hold` can say no
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"  # this hub, among every process's
        self._heard: dict[str, dict[str, datetime]] = {}  # identity -> {worker: when it last said so}
        self._unsubscribe: list[Callable[[], None]] = []

    def start(self) -> None:
        self._unsubscribe = [self.bus.subscribe(STREAMS, self._on_notice),
                             self.bus.subscribe(BUS, self._listen_again)]
        self._listen_again()

    def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []

    def _listen_again(self, _payload: object = None) -> None:
        """Listening from now on (at start, or after the bus lost notices): sure after a warm-up."""
        self._sure_from = self.now() + self.warmup

    def may_hold(self, audience: Iterable[str] | None) -> bool:
        """Might a stream on another worker belong to one of `audience` (None: everyone)?"""
        now = self.now()
        if audience is None or self._sure_from is None or now < self._sure_from:
            return True
        oldest = now - self.expiry
        for identity in audience:
            workers = self._heard.get(identity)
            if workers and any(when >= oldest for when in workers.values()):
                return True
        return False

    def opened(self, identity: str) -> None:
        self.bus.publish(STREAMS, {"worker": self.worker, "open": [identity]})

    def closed(self, identity: str) -> None:
        self.bus.publish(STREAMS, {"worker": self.worker, "closed": [identity]})

    def refresh(self, identities: Iterable[str]) -> None:
        ordered = sorted(identities)
        for start in range(0, len(ordered), PER_NOTICE):
            self.bus.publish(STREAMS, {"worker": self.worker, "open": ordered[start:start + PER_NOTICE]})

    def identities(self) -> frozenset[str]:
        """Identities with a stream on another worker, as last heard and not yet expired."""
        oldest = self.now() - self.expiry
        return frozenset(identity for identity, workers in self._heard.items()
                         if any(when >= oldest for when in workers.values()))

    def _on_notice(self, payload: dict) -> None:
        worker = payload.get("worker")
        if not isinstance(worker, str) or worker == self.worker:
            return
        now = self.now()
        for identity in _names(payload.get("open")):
            self._heard.setdefault(identity, {})[worker] = now
        for identity in _names(payload.get("closed")):
            workers = self._heard.get(identity)
            if workers is not None:
                workers.pop(worker, None)
                if not workers:
                    del self._heard[identity]
        self._forget_expired(now)

    def _forget_expired(self, now: datetime) -> None:
        oldest = now - self.expiry
        for identity in [i for i, workers in self._heard.items() if all(w < oldest for w in workers.values())]:
            del self._heard[identity]


def _names(value) -> list[str]:
    return [name for name in value if isinstance(name, str)] if isinstance(value, list) else []
