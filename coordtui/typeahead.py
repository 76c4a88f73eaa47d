"""Keys typed ahead are applied in order, each to the widget that has focus once the keys before it have taken effect.

Why Textual (8.2.8) needs help: the App takes every key from the terminal off its own queue in `App.on_event`, runs
a priority binding there at once, and otherwise posts the key to the queue of the widget focused *at that moment*.
The key then bubbles up widget by widget (one queue each), and ordinary bindings (tab's `focus_next`, a form's enter)
run only when it reaches `App._on_key` at the top. With keys queued up (a fast typist, a paste without bracketed
paste, a loaded machine) the App therefore hands out later keys before earlier ones took effect: a priority ctrl+s
submits before the text still queued for the field, and the characters after a tab land in the field the tab was
leaving.

`KeysInOrder` (mixed into the App) holds each key, paste and mouse press until the one before it has settled, then
dispatches it the ordinary way. Settled means: a marker message, posted to the widget the input went to right after
it, has bubbled back to the App, and then gone once round the App's own queue (what a binding asked of the App, such
as the callback that moves focus, is queued there behind the first marker). Queues are first in, first out, so the
marker arrives only after the input went as far up as it goes and its bindings ran. When it arrives while a queue on that path still holds something (the
`Input.Submitted` an enter posted, which moves to the next field), while focus or the screen changed (a key that
opened a form), or when a worker was started meanwhile (a key whose action opens its form from a worker: its first
step has run once the next marker is back), another marker goes round, through what has focus now, a few times at
most. A marker lost on the way (its widget removed, e.g. the form a ctrl+s closed) is noticed by a watchdog, so keys are never held for good.

Three waits are not about queues. A key that acts on the command palette's results (enter runs the highlighted one,
up/down move) waits while the palette is still searching for what was typed, so `ctrl+p`, a query and enter in one
burst run the command the query finds, not nothing (enter before the results came did nothing at all). And every
input waits while the pane it goes to fetches the first data it will show, so `2`, `r`, a reply and ctrl+s in one
burst reply to the first message in the inbox (`r` before the rows came did nothing, and the reply's letters were
taken as the inbox's keys). And every input waits while a form's ctrl+s is with the server, so that what was typed
after it goes to what the answer opens: `n`, a token's fields, ctrl+s and enter in one burst copy the new token
(enter came while the form was still sending, and did nothing).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any
from weakref import WeakSet

from textual import events
from textual.app import App
from textual.command import CommandPalette
from textual.dom import DOMNode
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input, TextArea

HELD = (events.Key, events.Paste, events.MouseDown, events.MouseUp)
MAX_ROUNDS = 8  # markers per input: enough for a key that opens a form (screen, compose, mount, focus)
GIVE_UP_AFTER = 5.0  # seconds: a path that never answers must not hold the keyboard
WATCH_EVERY = 0.1
ACTS_ON_RESULTS = frozenset({"enter", "up", "down", "pageup", "pagedown"})  # the command palette's keys for its list
RESULTS_POLL = 0.02  # seconds between looks at a palette still searching


class InputSettled(Message):
    """The marker: bubbles from the widget an input went to up to the App, behind that input."""

    def __init__(self, serial: int) -> None:
        super().__init__()
        self.serial = serial


@dataclass
class _Flight:
    serial: int
    path: list[DOMNode]
    focused: object
    screen: object
    workers: frozenset[int]  # ids of the workers there were: one started since may open a form at its first step
    rounds: int
    started: float
    behind_app_queue: bool = False  # the marker went round the App's own queue once more (see on_input_settled)


class KeysInOrder(App[None]):
    """Mixin for the App: keys, pastes and mouse presses take effect one after another, in the order typed.

    A mixin, not an object the app holds: Textual hands every input event to `App.on_event` and offers no other
    place to hold one back before it is dispatched, so this overrides it (and reads the App's focus, screen,
    queues and workers)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held_input: deque[events.Event] = deque()
        self._flight: _Flight | None = None
        self._serial = 0
        self._watchdog: Timer | None = None
        self._screens_met: WeakSet[Screen[Any]] = WeakSet()
        self._wait_since: float | None = None

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, HELD) and not event.is_forwarded:
            self._held_input.append(event)
            await self._dispatch_held()
            return
        await super().on_event(event)

    async def _dispatch_held(self) -> None:
        while self._flight is None and self._held_input:
            if self._must_wait(self._held_input[0]):
                self.set_timer(RESULTS_POLL, self._dispatch_after_wait, name="keys-in-order-results")
                return
            if self._screen_still_opening():
                self._send_marker(self.screen, rounds=1)  # through the new screen: its mount (and focus) first
                if self._flight is not None:
                    return
            event = self._held_input.popleft()
            target = self._input_target()
            typing = self._typed_into(target, event)  # asked first: dispatching marks the key forwarded
            await super().on_event(event)  # Textual's own dispatch: priority bindings, else to the focused widget
            while typing and self._typed_into(target, self._next_held()):
                # the same text field takes the next character, behind the one before
                await super().on_event(self._held_input.popleft())
            self._send_marker(target, rounds=1)

    def _must_wait(self, event: events.Event) -> bool:
        """`event` acts on results still coming: the command palette's while it searches for what was typed, or
        the first data of the pane in view while it is fetched (`2` then `r` in one burst replied to nothing, and
        the letters after it went to the inbox's keys: a walk in tmux found it). At most GIVE_UP_AFTER; the
        inputs after one that gave up do not wait again for the same results."""
        if not (self._palette_searching(event) or self._pane_awaits_first_data() or self._form_sending()):
            self._wait_since = None
            return False
        now = time.monotonic()
        if self._wait_since is None:
            self._wait_since = now
        return now - self._wait_since <= GIVE_UP_AFTER

    def _palette_searching(self, event: events.Event) -> bool:
        if not (isinstance(event, events.Key) and event.key in ACTS_ON_RESULTS):
            return False
        try:
            palette = self.screen
        except Exception:
            return False
        return isinstance(palette, CommandPalette) and any(
            worker.node is palette and not worker.is_finished for worker in self.workers)

    def _pane_awaits_first_data(self) -> bool:
        """A node on the way to what has focus is fetching the first data it shows (`awaits_first_data`, as
        panes/base.py's Pane says): its keys act on rows not there yet."""
        return any(getattr(node, "awaits_first_data", False) for node in self._path(self._input_target()))

    def _form_sending(self) -> bool:
        """The screen in view is a form whose submission is with the server (FormScreen.sending): what it answers
        decides where the next input goes (the form again, if refused; else what the answer opens)."""
        try:
            return bool(getattr(self.screen, "sending", False))
        except Exception:
            return False

    async def _dispatch_after_wait(self) -> None:
        if self._flight is None:
            await self._dispatch_held()

    def _screen_still_opening(self) -> bool:
        """Nothing has focus on a screen no input has gone to yet: it may be a form still mounting, whose field
        takes focus in a moment. The first input waits for one round through that screen (once per screen)."""
        try:
            screen = self.screen
        except Exception:
            return False
        if self.focused is not None or screen in self._screens_met:
            return False
        self._screens_met.add(screen)
        return True

    def _next_held(self) -> events.Event | None:
        return self._held_input[0] if self._held_input else None

    @staticmethod
    def _typed_into(target: DOMNode, event: events.Event | None) -> bool:
        """A printable key for an editable text field: the field inserts it and nothing moves, so the characters of
        a run can go to its queue one behind the other without waiting for each to settle (a 500-character paste
        then takes one round trip, not 500; on a loaded machine that was seconds)."""
        if not (isinstance(event, events.Key) and event.is_printable and not event.is_forwarded):
            return False
        if isinstance(target, TextArea):
            return not target.read_only
        return isinstance(target, Input)

    def _input_target(self) -> DOMNode:
        try:
            return self.focused or self.screen
        except Exception:  # no screen yet (starting) or any more (exiting)
            return self

    def _send_marker(self, target: DOMNode, rounds: int) -> None:
        self._serial += 1
        try:
            screen = self.screen
        except Exception:
            screen = None
        flight = _Flight(self._serial, self._path(target) or [self],
                         self.focused if screen is not None else None, screen, self._worker_ids(), rounds,
                         time.monotonic())
        if target is self or not target.post_message(InputSettled(flight.serial)):
            return  # nothing on the way to wait for (the target is gone or is the App itself)
        self._flight = flight
        if self._watchdog is None:
            self._watchdog = self.set_interval(WATCH_EVERY, self._check_flight, name="keys-in-order")
        else:
            self._watchdog.resume()

    async def on_input_settled(self, marker: InputSettled) -> None:
        marker.stop()
        flight = self._flight
        if flight is None or marker.serial != flight.serial:
            return  # late: the watchdog already let the next input go
        if not flight.behind_app_queue:
            # A binding runs when its key reaches the App, and what it asks of the App comes after the marker in
            # the App's queue: `focus()` is such a callback (i in Chat focuses the message box; the next key went
            # to the list). Once more round the App's own queue, behind it.
            flight.behind_app_queue = True
            self.post_message(InputSettled(flight.serial))
            return
        target = self._input_target()
        if flight.rounds < MAX_ROUNDS and (self._moved(flight) or self._busy(flight.path + self._path(target))
                                           or not self._worker_ids() <= flight.workers):
            self._flight = None
            self._send_marker(target, flight.rounds + 1)
            if self._flight is not None:
                return
        self._flight = None
        await self._dispatch_held()

    def _moved(self, flight: _Flight) -> bool:
        try:
            return self.screen is not flight.screen or self.focused is not flight.focused
        except Exception:
            return False

    def _worker_ids(self) -> frozenset[int]:
        return frozenset(id(worker) for worker in self.workers)

    def _path(self, target: DOMNode) -> list[DOMNode]:
        return target.ancestors_with_self if target is not self else []

    def _busy(self, path: list[DOMNode]) -> bool:
        """Whether a queue on the path still holds messages (the App's own queue holds the next inputs)."""
        return any(not node._message_queue.empty() for node in path if node is not self)

    async def _check_flight(self) -> None:
        flight = self._flight
        if flight is None:
            if self._watchdog is not None:
                self._watchdog.pause()
            return
        lost = any(node._closing or node._closed or not node.is_attached for node in flight.path if node is not self)
        if lost or time.monotonic() - flight.started > GIVE_UP_AFTER:
            self._flight = None
            await self._dispatch_held()
