"""What keeps the app live whichever pane is showing: the unread counts behind the tab badges, urgent alerts
and quiet toasts, desktop notifications, and the undo slot. An object the app holds (`app.live`): it is given
the session (what the server sent, the client) and a LiveHost (the few things it asks of the app), and never
touches a pane or a widget; the app draws the badges and tells the panes."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable, Protocol

from textual.notifications import SeverityLevel
from textual.worker import Worker

from .client.api import ApiError, ConnectionFailed
from .client.models import Channel, ServerEvent, Wake, age_text
from .client.safe_text import neutralise
from .alerts import SeenMark
from .session import Session
from .unread import COUNT_EVENTS, UnreadCounts, unseen_buzz

TOAST_SPACING = 2.0  # seconds between two quiet toasts for one pane
COUNT_SPACING = 0.3  # seconds between two refetches of the counts: a burst of events costs a few, not one each
_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)


def osc_payload(text: str, limit: int) -> str:
    """Text inside an OSC sequence: controls as placeholders (none can end the sequence and start another:
    ESC, BEL, C1 ST), `;` (OSC 777's separator) and newlines as spaces, at most `limit` characters."""
    return neutralise(text).replace(";", " ").replace("\n", " ").replace("\t", " ")[:limit]


def osc_notification(title: str, body: str) -> str:
    """A desktop notification through the terminal: OSC 9 (iTerm2, kitty, WezTerm, Windows Terminal) and
    OSC 777 (rxvt, foot, Ghostty, VTE). Terminals that know neither ignore both."""
    title, body = osc_payload(title, 80), osc_payload(body, 200)
    return f"\x1b]9;{title}: {body}\x07\x1b]777;notify;{title};{body}\x07"


def since_text(seconds: float) -> str:
    """'12s', '4m', '2h 5m', '1d 3h': seconds only under a minute."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    return age_text(_EPOCH - timedelta(seconds=seconds), _EPOCH)


class LiveHost(Protocol):
    """The few things Live asks of the app it serves (CoordApp is one)."""

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """A toast."""

    def bell(self) -> None:
        """The terminal's bell (--bell, on urgent items)."""

    def write_terminal(self, text: str) -> None:
        """Raw output to the terminal (the OSC sequences of a desktop notification)."""

    def run_worker(self, work: Coroutine[Any, Any, None], name: str | None = "", group: str = "default",
                   description: str = "", exit_on_error: bool = True) -> Worker[None]:
        """Textual's: the counts are refetched in a worker of the app."""

    def badges_changed(self) -> None:
        """The counts changed: the tab labels are drawn again."""

    def wake_changed(self, refilter: bool) -> None:
        """The wake list as shown changed (kept alerts, chat items from the channels): the Wake pane shows it
        again when it next comes into view, or now if `refilter` and it is in view."""


class Live:
    def __init__(self, session: Session, host: LiveHost, *, desktop: bool = False, bell: bool = False) -> None:
        self.session = session
        self.host = host
        self.desktop_notify = desktop  # --notify: desktop notifications through the terminal
        self.ring_bell = bell  # --bell: the terminal's bell on urgent items
        self.buzz_seen = SeenMark()
        self.counting = False  # a refetch of the counts is running
        self.undo_slot: tuple[str, Callable[[], Awaitable[object]]] | None = None
        self._toasted: dict[str, tuple[float, int]] = {}  # pane id -> (last toast shown at, held back since)
        self._seen_urgent: set[str] | None = None  # high-priority wake items already toasted (None: none loaded yet)

    @property
    def counts(self) -> UnreadCounts:
        """The session's: one store of what the server sent."""
        return self.session.counts

    # --- events ----------------------------------------------------------------------------

    def note_events(self, batch: list[ServerEvent], in_view: str | None, chat_open: str | None,
                    chat_channels: dict[str, Channel]) -> None:
        """One batch of events: decide whether the counts need a refetch, toast what arrived, alert what is urgent.
        `in_view`: the id of the pane in view; `chat_open`: the channel open in the Chat pane if it is in view."""
        for event in batch:
            if event.type in COUNT_EVENTS or (event.type == "inbox_check" and event.data.get("action") == "ack"):
                self.counts.due = True
            if event.type == "wake_pulse":
                self.counts_seen(wake=Wake.parse(event.data))
            elif event.type == "message" and event.data.get("sender") and not event.data.get("urgent"):
                self.quiet_toast("inbox", in_view, "New mail", f"{event.data.get('sender')}: {event.data.get('title')}")
            elif event.type == "chat_message":
                self.chat_arrived(event, in_view, chat_open, chat_channels)
        if self.counts.due:
            self.refresh_counts()
        for event in batch:
            if event.type == "message" and event.data.get("urgent"):
                self.alert(f"Urgent from {event.data.get('sender')}: {event.data.get('title')}")
            elif event.type == "wake_pulse":
                self.wake_seen(Wake.parse(event.data))

    def chat_arrived(self, event: ServerEvent, in_view: str | None, chat_open: str | None,
                     chat_channels: dict[str, Channel]) -> None:
        message = event.data.get("message") or {}
        sender = message.get("sender")
        identity = self.session.identity
        if not sender or sender == identity:
            return
        if chat_open is not None and chat_open == event.data.get("channelId"):
            return  # being read as it arrives
        known = {c.id: c for c in self.counts.channels or []} | chat_channels
        channel_id = event.data.get("channelId")
        channel = known.get(channel_id) if isinstance(channel_id, str) else None
        self.quiet_toast("chat", in_view, f"Chat {channel.label(identity or '')}" if channel else "New chat",
                         f"{sender}: {str(message.get('body') or '')[:100]}")

    def quiet_toast(self, pane_id: str, in_view: str | None, title: str, text: str) -> None:
        """New non-urgent mail or chat: a short toast when its pane is not in view (urgent mail has its own)."""
        if in_view == pane_id:
            return
        # A burst (100 chat messages a second) is one toast per TOAST_SPACING, not a wall of them: the badge
        # counts them all, and the next toast says how many were held back.
        now = time.monotonic()
        shown_at, held = self._toasted.get(pane_id, (float("-inf"), 0))
        if now - shown_at < TOAST_SPACING:
            self._toasted[pane_id] = (shown_at, held + 1)
            return
        self._toasted[pane_id] = (now, 0)
        text += f" (and {held} more)" if held else ""
        self.host.notify(text, title=title, severity="information", timeout=4)
        self.send_desktop(title, text)

    def wake_seen(self, wake: Wake) -> None:
        """Every wake answer and pulse passes here, whichever pane is active: one-shot items join the
        alert store, and high-priority items that were not there before toast (not on the first load)."""
        if self.session.alerts.absorb(wake, self.session.now()):
            self.host.wake_changed(refilter=False)
        urgent = {i.key: i for i in wake.items if i.priority == "high"}
        if self._seen_urgent is not None:
            for key, item in urgent.items():
                if key not in self._seen_urgent and item.source != "message":  # mail toasts on its own event
                    self.alert(item.summary, title="Question" if item.source == "ask" else "Urgent")
        self._seen_urgent = (self._seen_urgent or set()) | set(urgent)

    def alert(self, text: str, title: str = "Urgent") -> None:
        self.host.notify(text, title=title, severity="warning", timeout=8)
        self.send_desktop(title, text)
        if self.ring_bell:
            self.host.bell()

    def send_desktop(self, title: str, text: str) -> None:
        if self.desktop_notify:
            self.host.write_terminal(osc_notification(title, text))

    # --- counts and badges ---------------------------------------------------------------

    def recount(self) -> None:
        self.counts.due = True
        self.refresh_counts()

    def refresh_counts(self) -> None:
        """Refetches the counts in a worker of the app, unless one runs (it goes round again while due)."""
        if not self.counting and self.session.client is not None:
            self.host.run_worker(self._refresh_counts(), group="counts", exit_on_error=False)

    async def _refresh_counts(self) -> None:
        """Refetches the four counts; events that arrive meanwhile cause exactly one more round."""
        if self.counting or self.session.client is None:
            return
        client = self.session.client
        self.counting = True
        try:
            while self.counts.due:
                self.counts.due = False
                try:
                    wake = await client.wake()
                    mail = await client.unread_mail()
                    channels = await client.channels()
                    buzz = await self.buzz_count()
                except (ApiError, ConnectionFailed):
                    return  # a reconnect marks the counts due again
                self.counts.fetches += 1
                self.counts.buzz = buzz
                self.channels_changed(channels)
                self.wake_seen(wake)
                self.counts_seen(wake=wake, mail=mail)
                await asyncio.sleep(COUNT_SPACING)  # what arrives meanwhile joins one next round
        finally:
            self.counting = False

    async def buzz_count(self) -> int | None:
        """Buzz events not yet seen; None from a server without Buzz."""
        try:
            return unseen_buzz(await self.session.connected_client().buzz_events(limit=100), self.buzz_seen.newest)
        except ApiError as exc:
            if exc.unsupported:
                return None
            raise

    def buzz_viewed(self, newest: int) -> None:
        """The Buzz pane showed the events up to `newest`: none of them counts as unseen any more."""
        self.buzz_seen.advance(newest)
        self.counts.buzz = 0
        self.host.badges_changed()

    def counts_seen(self, *, wake: Wake | None = None, mail: int | None = None,
                    channels: list[Channel] | None = None) -> None:
        """Panes report what they loaded, so a pane in view and its badge never disagree."""
        if channels is not None:
            self.channels_changed(channels)
        if mail is not None:
            self.counts.mail = mail
        if wake is not None:
            self.counts.last_wake = wake
            self.counts.wake = len(self.session.wake_view(wake).items)
        self.host.badges_changed()

    def channels_changed(self, channels: list[Channel]) -> None:
        """Chat items in Wake come from the channels on older servers: Wake follows their unread counts."""
        before = [(c.id, c.unread) for c in self.counts.channels or []]
        self.counts.set_channels(channels)
        if before == [(c.id, c.unread) for c in channels]:
            return
        if self.counts.last_wake is not None:
            self.counts.wake = len(self.session.wake_view(self.counts.last_wake).items)
        self.host.wake_changed(refilter=True)

    # --- undo ------------------------------------------------------------------------------

    def offer_undo(self, what: str, undo: Callable[[], Awaitable[object]]) -> None:
        self.undo_slot = (what, undo)
        self.host.notify(f"{what} · u undoes", timeout=6)

    async def undo(self) -> bool:
        """Runs what the last offer undoes; True when it was undone (what is in view then shows it)."""
        if self.undo_slot is None:
            self.host.notify("Nothing to undo", timeout=2)
            return False
        what, undo = self.undo_slot
        self.undo_slot = None
        try:
            await undo()
        except (ApiError, ConnectionFailed) as exc:
            self.host.notify(f"Could not undo: {exc}", severity="error", timeout=5)
            return False
        self.host.notify(f"Undone: {what}", timeout=3)
        return True
