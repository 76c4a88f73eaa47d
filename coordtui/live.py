"""What keeps the app live whichever pane is showing: tab badges, quiet toasts, desktop notifications,
"updated 12s ago", and the undo slot. A mixin of CoordApp, kept apart so app.py stays about wiring."""
from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Awaitable, Callable

from textual import work
from textual.css.query import NoMatches
from textual.widgets import Static, TabbedContent

from .client.api import ApiError, ConnectionFailed
from .client.models import ServerEvent, Wake, WakeItem, age_text
from .client.safe_text import neutralise
from .alerts import SeenMark
from .unread import COUNT_EVENTS, UnreadCounts, tab_labels, unseen_buzz, with_chat

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


class LiveMixin:
    """Needs from the app: `client`, `identity`, `alerts`, `panes()`, `active_pane`, `now()`, `notify`."""

    def init_live(self, desktop: bool) -> None:
        self.desktop_notify = desktop
        self.counts = UnreadCounts()
        self.buzz_seen = SeenMark()
        self._counting = False
        self.undo_slot: tuple[str, Callable[[], Awaitable]] | None = None
        self._toasted: dict[str, tuple[float, int]] = {}  # pane id -> (last toast shown at, held back since)

    # --- counts and badges ---------------------------------------------------------------

    def note_events(self, batch: list[ServerEvent]) -> None:
        """One batch of events: decide whether the counts need a refetch, and toast what arrived."""
        for event in batch:
            if event.type in COUNT_EVENTS or (event.type == "inbox_check" and event.data.get("action") == "ack"):
                self.counts.due = True
            if event.type == "wake_pulse":
                self.counts_seen(wake=Wake.parse(event.data))
            elif event.type == "message" and not event.data.get("urgent"):
                self.quiet_toast("inbox", "New mail", f"{event.data.get('sender')}: {event.data.get('title')}")
            elif event.type == "chat_message":
                self.chat_arrived(event)
        if self.counts.due:
            self.refresh_counts()

    def chat_arrived(self, event: ServerEvent) -> None:
        message = event.data.get("message") or {}
        sender = message.get("sender")
        if not sender or sender == self.identity:
            return
        chat = self.pane("chat")
        if chat.active and chat.current == event.data.get("channelId"):
            return  # being read as it arrives
        known = {c.id: c for c in self.counts.channels or []} | (chat.channels or {})
        channel = known.get(event.data.get("channelId"))
        self.quiet_toast("chat", f"Chat {channel.label(self.identity or '')}" if channel else "New chat", f"{sender}: {str(message.get('body') or '')[:100]}")

    def quiet_toast(self, pane_id: str, title: str, text: str) -> None:
        """New non-urgent mail or chat: a short toast when its pane is not in view (urgent mail has its own)."""
        active = self.active_pane
        if active is not None and active.id == pane_id:
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
        self.notify(text, title=title, severity="information", timeout=4)
        self.send_desktop(title, text)

    def send_desktop(self, title: str, text: str) -> None:
        if self.desktop_notify and self._driver is not None:
            self._driver.write(osc_notification(title, text))
            self._driver.flush()

    def recount(self) -> None:
        self.counts.due = True
        self.refresh_counts()

    @work(group="counts", exit_on_error=False)
    async def refresh_counts(self) -> None:
        """Refetches the three counts; events that arrive meanwhile cause exactly one more round."""
        if self._counting or self.client is None:
            return
        self._counting = True
        try:
            while self.counts.due:
                self.counts.due = False
                try:
                    wake = await self.client.wake()
                    mail = await self.client.unread_mail()
                    channels = await self.client.channels()
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
            self._counting = False

    async def buzz_count(self) -> int | None:
        """Buzz events not yet seen; None from a server without Buzz."""
        try:
            return unseen_buzz(await self.client.buzz_events(limit=100), self.buzz_seen.newest)
        except ApiError as exc:
            if exc.unsupported:
                return None
            raise

    def buzz_viewed(self, newest: int) -> None:
        """The Buzz pane showed the events up to `newest`: none of them counts as unseen any more."""
        self.buzz_seen.advance(newest)
        self.counts.buzz = 0
        self.render_badges()

    def counts_seen(self, *, wake: Wake | None = None, mail: int | None = None, channels=None) -> None:
        """Panes report what they loaded, so a pane in view and its badge never disagree."""
        if channels is not None:
            self.channels_changed(channels)
        if mail is not None:
            self.counts.mail = mail
        if wake is not None:
            self.counts.last_wake = wake
            self.counts.wake = len(self.wake_view(wake).items)
        self.render_badges()

    def channels_changed(self, channels) -> None:
        """Chat items in Wake come from the channels on older servers: Wake follows their unread counts."""
        before = [(c.id, c.unread) for c in self.counts.channels or []]
        self.counts.set_channels(channels)
        if before == [(c.id, c.unread) for c in channels]:
            return
        if self.counts.last_wake is not None:
            self.counts.wake = len(self.wake_view(self.counts.last_wake).items)
        try:
            wake = self.pane("wake")
        except NoMatches:
            return
        if wake.active:
            wake.refilter()
        else:
            wake.stale = True

    def render_badges(self) -> None:
        if not self.is_mounted:
            return
        from .app import PANES
        badges = self.counts.badges()
        labels = tab_labels([label for _, label, _ in PANES], [badges.get(pane_id) for pane_id, _, _ in PANES],
                            self.size.width)
        try:
            tabs = self.main_screen().query_one("#panes", TabbedContent)
            for (pane_id, _, _), text in zip(PANES, labels):
                tab = tabs.get_tab(f"tab-{pane_id}")
                if tab.label_text != text:
                    tab.label = text
        except NoMatches:  # torn down
            return

    def wake_view(self, wake: Wake) -> Wake:
        """The wake list as shown: the server's items, chat items built from the channels when an older
        server sends none, and one-shot alerts kept until dismissed."""
        wake = with_chat(wake, self.counts.channels, self.identity or "")
        present = {item.key for item in wake.items}
        now = self.now()
        kept = [alert.shown(now) for alert in self.alerts.alerts() if alert.item.key not in present]
        if not kept:
            return wake
        note = f"{len(kept)} earlier alert{'s' if len(kept) > 1 else ''} kept on screen (a dismisses)"
        summary = f"{wake.summary} · {note}" if wake.summary else note
        return replace(wake, items=wake.items + kept, summary=summary)

    def main_screen(self):
        """The panes' screen, also while a dialog is on top of it."""
        if not self.screen_stack:  # torn down
            raise NoMatches("no screen")
        return self.screen_stack[0]

    # --- "updated 12s ago" -----------------------------------------------------------------

    def render_updated(self) -> None:
        if not self.is_mounted:
            return
        pane = self.active_pane
        text = ""
        if pane is not None and pane.busy:
            text = "refreshing…"
        elif pane is not None and pane.updated_at is not None:
            text = f"updated {since_text((self.now() - pane.updated_at).total_seconds())} ago"
        try:
            label = self.main_screen().query_one("#updated", Static)
        except NoMatches:
            return
        if str(label.content) != text:
            label.update(text)

    # --- undo ------------------------------------------------------------------------------

    def offer_undo(self, what: str, undo: Callable[[], Awaitable]) -> None:
        self.undo_slot = (what, undo)
        self.notify(f"{what} · u undoes", timeout=6)

    @work(group="undo", exit_on_error=False)
    async def action_undo(self) -> None:
        if self.undo_slot is None:
            self.notify("Nothing to undo", timeout=2)
            return
        what, undo = self.undo_slot
        self.undo_slot = None
        try:
            await undo()
        except (ApiError, ConnectionFailed) as exc:
            self.notify(f"Could not undo: {exc}", severity="error", timeout=5)
            return
        self.notify(f"Undone: {what}", timeout=3)
        pane = self.active_pane
        if pane is not None:
            pane.request_reload()

    def open_chat_item(self, item: WakeItem) -> None:
        chat = self.pane("chat")
        chat.input_next = True
        self.action_pane("chat")
        chat.open_for_reading(str(item.channel_id or item.id))
