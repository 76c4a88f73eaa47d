"""Wake pulses: a `wake_pulse` (the full WakePayload) to an identity's open streams when something
enters its wake, coalesced per identity, on connect, and every 30 minutes.

Debounce per identity: the first signal after a quiet window pulses at once (leading edge); signals
arriving during the window are folded into one trailing pulse at the window's end. A burst of 100
signals therefore gives two pulses. A pulse is computed only for identities with an open stream in
this process, once per pulse, and delivers buzz items (mark_delivered=True) like GET /api/wake.

A pulse reaches the streams only after every event this process had heard of when it was computed
(SSEHub.after_fanout): a change's event frame comes first, then a pulse that shows it. Computed from
the database at once, a pulse used to overtake a message frame the hub was holding back for a lower
id still committing elsewhere (two workers under load), and the stream then had the message and no
pulse after it. A change that lands while a pulse is computed signals again: a trailing pulse follows.
When the bus listens again after losing its connection, the `wake` signals other processes sent
meanwhile are gone: every identity with a stream or wake listener here gets a pulse then.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from .. import jsonstrict
from ..errors import log_background_failure
from ..metrics import process_metrics
from ..events.channels import BUS, EPHEMERAL, WAKE
from ..mcp.wake_listeners import WakeListeners
from .presence import PresenceTracker
from .sse import SSEHub
from .wake_cache import WakeCache

log = logging.getLogger("coord.wake")


@dataclass
class _State:
    last_pulse: float = float("-inf")
    running: bool = False
    pending: bool = False
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class WakePulser:
    def __init__(self, coord, sse: SSEHub, listeners: WakeListeners, wake_cache: WakeCache,
                 presence: PresenceTracker, window_seconds: float = 1.5, periodic_seconds: float = 1800.0,
                 monotonic=time.monotonic):
        self.coord = coord
        self.sse, self.listeners, self.wake_cache, self.presence = sse, listeners, wake_cache, presence
        self.window_seconds = window_seconds
        self.periodic_seconds = periodic_seconds
        self._monotonic = monotonic
        self._states: dict[str, _State] = {}
        self._unsubscribe: list = []
        self.pulses_sent = 0
        self._pulse_counter = process_metrics().wake_pulses

    async def start(self) -> None:
        bus = self.coord.bus
        self._unsubscribe = [bus.subscribe(WAKE, self._on_signal),
                             bus.subscribe(BUS, lambda _payload: self.signal_everyone())]
        self.coord.spawn(self._periodic(), "wake-periodic")

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        for state in self._states.values():
            if state.timer:
                state.timer.cancel()
        self._states.clear()

    # signals
    def _on_signal(self, payload: dict) -> None:
        identity = payload.get("identity") if isinstance(payload, dict) else None
        if isinstance(identity, str) and identity:
            self.signal(identity)

    def wants_pulse(self, identity: str) -> bool:
        """An open SSE stream, or an MCP client subscribed to coord://wake (told only that it changed)."""
        return self.sse.has_stream(identity) or self.listeners.has_listener(identity)

    def signal(self, identity: str) -> None:
        if self.coord.shutting_down is not None and self.coord.shutting_down.is_set():
            return
        if not self.wants_pulse(identity):
            return
        state = self._states.setdefault(identity, _State())
        now = self._monotonic()
        if state.running or now - state.last_pulse < self.window_seconds:
            state.pending = True
            self._schedule_trailing(identity, state, now)
            return
        self._fire(identity, state)

    def _schedule_trailing(self, identity: str, state: _State, now: float) -> None:
        if state.timer is not None or state.running:
            return  # a trailing pulse is already due, or will be scheduled when the running one ends
        delay = max(0.0, state.last_pulse + self.window_seconds - now)
        state.timer = asyncio.get_running_loop().call_later(delay, self._trailing, identity)

    def _trailing(self, identity: str) -> None:
        state = self._states.get(identity)
        if state is None:
            return
        state.timer = None
        if state.pending and not state.running:
            if self.wants_pulse(identity):
                self._fire(identity, state)
            else:
                self._states.pop(identity, None)

    def _fire(self, identity: str, state: _State) -> None:
        state.running, state.pending = True, False
        state.last_pulse = self._monotonic()
        self.coord.spawn(self._pulse(identity, state), f"wake-pulse:{identity}")

    async def _pulse(self, identity: str, state: _State) -> None:
        try:
            # Only an SSE stream receives the payload (and so may mark buzz items delivered). It comes
            # from the wake cache, as GET /api/wake's does: read on the reader pool (the writer only
            # when buzz items are delivered) and kept for the GET that usually follows a pulse.
            if self.sse.has_stream(identity):
                payload = jsonstrict.loads_lenient(await self.wake_cache.payload(
                    identity, False, True, self.presence.snapshot))
                # Each process pulses the streams it holds, so a pulse never travels to the others (and a
                # wake of 50 items is larger than a NOTIFY may carry); after the events it may show.
                pulse = {"type": "wake_pulse", "to": [identity], "data": payload}
                self.sse.after_fanout(self.sse.announced, lambda: self.coord.bus.publish_here(EPHEMERAL, pulse))
            self.listeners.pulse(identity)  # MCP subscribers read coord://wake themselves (which delivers buzz items)
            self.pulses_sent += 1
            self._pulse_counter.inc()
        except Exception:
            log_background_failure(log, "computing the wake pulse for %s failed", identity)
        finally:
            state.running = False
            if state.pending:
                self._schedule_trailing(identity, state, self._monotonic())
            elif state.timer is None:
                self._forget_later(identity)

    def _forget_later(self, identity: str) -> None:
        """Drop idle per-identity state once its window has passed, so the map stays small."""
        def forget() -> None:
            state = self._states.get(identity)
            if state and not state.running and not state.pending and state.timer is None \
                    and self._monotonic() - state.last_pulse >= self.window_seconds:
                self._states.pop(identity, None)
        asyncio.get_running_loop().call_later(self.window_seconds, forget)

    def signal_everyone(self) -> None:
        """A pulse for every identity with a stream or wake listener in this process."""
        for identity in {*self.sse.streaming_identities(), *self.listeners.identities()}:
            self.signal(identity)

    async def _periodic(self) -> None:
        while True:
            await asyncio.sleep(self.periodic_seconds)
            self.signal_everyone()
