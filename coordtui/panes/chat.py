"""Chat: channels with unread counts, messages, send, typing indicator, jump to the next unread channel."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Input, Static

from ..agentmark import named
from ..client import limits
from ..client.models import Channel, ChatMessage, ServerEvent
from ..screens.confirm import ConfirmScreen
from ..screens.form import Field, FormScreen
from ..screens.page_links import PageLink, linked, text_links, use_links
from ..session import Session
from .base import Pane
from ..tables import PlainTable

TYPING_SHOWN_FOR = 6.0
TYPING_SENT_EVERY = 3.0


ChatData = tuple[list[Channel], list[ChatMessage] | None]  # the channels; the open one's history, when fetched


class ChatPane(Pane[ChatData]):
    EMPTY_HINT = "Channels and direct messages appear here. d: a direct message, g: a group."
    EVENT_TYPES = frozenset({"chat_message", "resync", "reconnected"})
    KEYS = [("enter", "open channel / send"), ("n / N", "next / previous unread channel"), ("i", "write a message"),
            ("d", "open a direct message"), ("g", "new group chat"), ("x", "archive the channel (asks; u undoes)"),
            ("X", "archived chats: what arrived since, unarchive"), ("/", "filter channels"),
            ("o / y", "open / copy a link of the open channel's messages (newest first; a chooser when several)"),
            ("escape", "back to the channel list"),
            ("", "the open channel is marked read as messages arrive while this pane is in view")]
    BINDINGS = [Binding("n", "next_unread(1)", "Next unread", id="chat.next_unread"),
                Binding("N", "next_unread(-1)", "Prev unread", show=False, id="chat.prev_unread"),
                Binding("i", "write", "Write", id="chat.write"), Binding("d", "open_dm", "DM", id="chat.dm"),
                Binding("x", "archive", "Archive", id="chat.archive"),
                Binding("X", "ops('archived_chats')", "Archived", show=False, id="chat.archived"),
                Binding("g", "ops('group')", "Group", id="chat.group"),
                Binding("o", "links('open')", "Open link", show=False, id="chat.open_link"),
                Binding("y", "links('copy')", "Copy link", show=False, id="chat.copy_link")]

    @dataclass
    class ChannelsShown(Message):
        """The pane loaded the channels with their unread counts (the Chat badge says the same)."""
        channels: list[Channel]

    @dataclass
    class ChannelRead(Message):
        """The open channel was marked read as its messages arrived: its count is zero now."""
        channel_id: str

    def __init__(self, session: Session, *, title: str, id: str) -> None:
        super().__init__(session, title=title, id=id)
        self.channels: dict[str, Channel] = {}
        self.current: str | None = None
        self.messages: dict[int, ChatMessage] = {}
        self.typing: dict[str, float] = {}
        self._typing_sent = 0.0
        self._typing_text = ""
        self.need_messages = True
        self.input_next = False  # the next time the pane comes into view, the cursor goes to the message box
        self.drafts: dict[str, str] = {}  # what was typed (or refused) for channels other than the open one

    def compose(self) -> ComposeResult:
        with Horizontal(classes="split"):
            table = PlainTable(id="chat-channels", cursor_type="row", classes="list narrow")
            table.add_columns("Channel", "New")
            table.give_way = ("Channel",)  # a long channel name is cut, not its unread count
            yield table
            with Vertical(classes="detail"):
                yield Static("", id="chat-title", classes="pane-summary")
                with VerticalScroll(id="chat-log"):
                    yield Static("Select a channel.", id="chat-messages")
                yield Static("", id="chat-typing")
                yield Input(placeholder="message (enter sends)", id="chat-input", max_length=limits.CHAT_BODY)

    def on_mount(self) -> None:
        self.query_one("#chat-input", Input).cursor_blink = False
        self.set_interval(1.0, self.render_typing)

    async def load(self) -> ChatData:
        channels = await self.client.channels()
        messages = None
        if self.current is None and channels:
            self.set_current(channels[0].id)
            self.need_messages = True
        if self.current and self.need_messages:
            # live messages arrive by event; the history is fetched on opening a channel or after a gap
            self.need_messages = False
            messages = await self.client.chat_messages(self.current, limit=100)
        current = next((c for c in channels if c.id == self.current), None)
        if current is not None and current.unread and self.active:
            await self.client.mark_read(current.id)
            self.post_message(self.CountsStale())
            channels = [c if c.id != self.current else Channel(c.id, c.type, c.name, c.members, 0, c.last_body,
                                                                 c.last_at) for c in channels]
        return channels, messages

    def show(self, data: ChatData) -> None:
        channels, messages = data
        table = self.query_one("#chat-channels", PlainTable)
        table.clear()
        self.channels = {c.id: c for c in channels}
        self.post_message(self.ChannelsShown(channels))
        me = self.session.identity or ""
        for channel in channels:
            if not self.matches(channel.label(me), channel.name, *channel.members):
                continue
            unread = Text(str(channel.unread), style="bold cyan") if channel.unread else Text("")
            style = "bold" if channel.unread else ""
            table.add_row(Text(channel.label(me), style=style), unread, key=channel.id)
        table.fit_columns()
        if self.current is not None and self.current in table.rows:
            table.move_cursor(row=table.get_row_index(self.current))
        if messages is not None:
            self.messages = {m.id: m for m in messages}
        self.render_messages()

    def render_messages(self) -> None:
        channel = self.channels.get(self.current or "")
        me = self.session.identity or ""
        self.query_one("#chat-title", Static).update(
            Text(f"{channel.label(me)} · {', '.join(channel.members)}") if channel else "No channel")
        lines = []  # Text, never markup: the senders' names and bodies are other identities' text
        for message in self.shown_messages():
            when = message.created_at.strftime("%H:%M") if message.created_at else "--:--"
            colour = "green" if message.sender == me else "cyan"
            lines.append(Text.assemble((when, "dim"), " ", (named(message.sender, message.is_agent), colour), ": ",
                                       linked(message.body)))
        self.query_one("#chat-messages", Static).update(Text("\n").join(lines) if lines else "No messages yet.")
        self.query_one("#chat-log", VerticalScroll).scroll_end(animate=False)

    def shown_messages(self) -> list[ChatMessage]:
        """The open channel's messages as shown, oldest first (the latest 200)."""
        return sorted(self.messages.values(), key=lambda m: (m.created_at is None, m.created_at, m.id))[-200:]

    def action_links(self, how: Literal["open", "copy"]) -> None:
        """o / y in Chat: the links of the open channel's messages, the newest message's first (the only one
        at once; a chooser when there are several). The log has no cursor of its own to pick a message with."""
        links: list[PageLink] = []
        for message in reversed(self.shown_messages()):
            links += [link for link in text_links(message.body) if link.url not in {l.url for l in links}]
        use_links(self.app, links, how, "this channel")

    def render_typing(self) -> None:
        now = time.monotonic()
        who = sorted(name for name, at in self.typing.items() if now - at < TYPING_SHOWN_FOR)
        text = f"[i]{', '.join(who)} {'is' if len(who) == 1 else 'are'} typing…[/i]" if who else ""
        if text != self._typing_text:
            self._typing_text = text
            self.query_one("#chat-typing", Static).update(text)

    def handle_events(self, events: list[ServerEvent]) -> None:
        changed = read_now = False
        for event in events:
            channel_id = event.data.get("channelId")
            if event.type == "chat_typing" and channel_id == self.current:
                self.typing[str(event.data.get("identity"))] = time.monotonic()
            elif event.type == "chat_message" and channel_id == self.current:
                message = ChatMessage.parse(event.data.get("message") or {}, channel_id)
                self.messages[message.id] = message
                self.typing.pop(message.sender, None)
                changed = True
                read_now = read_now or message.sender != self.session.identity
        if any(e.type in ("resync", "reconnected") for e in events):
            self.need_messages = True
        if changed and self.is_mounted:
            self.render_messages()
        self.render_typing()
        if read_now and self.active:
            self.mark_current_read()  # read as it arrives: the channel is open and in view
        else:
            super().handle_events(events)

    @work(group="chat-read", exit_on_error=False)
    async def mark_current_read(self) -> None:
        channel_id = self.current
        if channel_id is None or await self.act(self.client.mark_read(channel_id)) is None:
            return
        self.post_message(self.ChannelRead(channel_id))
        self.request_reload()  # the other channels' counts and order

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:  # the rows' keys are the channels' ids
            self.open_channel(event.row_key.value)
        self.query_one("#chat-input", Input).focus()

    def open_channel(self, channel_id: str) -> None:
        if channel_id != self.current:
            self.set_current(channel_id)
            self.messages = {}
            self.typing = {}
        self.need_messages = True
        self.request_reload()

    def unsent_drafts(self) -> int:
        """Channels with text typed and not sent (the open channel's input included)."""
        kept: set[str | None] = {channel for channel, text in self.drafts.items() if text.strip()}
        if self.query_one("#chat-input", Input).value.strip():
            kept.add(self.current)
        return len(kept)

    def set_current(self, channel_id: str | None) -> None:
        """Each channel keeps its own draft: what was typed for one is never sent to the next one opened."""
        box = self.query_one("#chat-input", Input)
        if self.current is not None and box.value:
            self.drafts[self.current] = box.value
        self.current = channel_id
        box.value = self.drafts.pop(channel_id, "") if channel_id else ""

    def action_next_unread(self, step: int = 1) -> None:
        ids = list(self.channels)
        if step < 0:
            ids.reverse()
        start = ids.index(self.current) + 1 if self.current in ids else 0
        for channel_id in ids[start:] + ids[:start]:
            if self.channels[channel_id].unread and channel_id != self.current:
                self.open_channel(channel_id)
                return
        self.notify("No unread channels", timeout=2)

    def action_write(self) -> None:
        self.focus_input()

    def focus_input(self) -> None:
        self.query_one("#chat-input", Input).focus()

    def focus_default(self) -> None:
        if self.input_next:
            self.input_next = False
            self.focus_input()
        else:
            super().focus_default()

    def open_for_reading(self, channel_id: str) -> None:
        """From Wake or a DM: the channel opens with the cursor in the message box."""
        self.open_channel(channel_id)
        if self.active:
            self.focus_input()
        else:
            self.input_next = True

    @work(group="chat-action", exit_on_error=False)
    async def action_archive(self) -> None:
        channel = self.channels.get(self.current or "")
        if channel is None:
            return
        label = channel.label(self.session.identity or "")
        if not await self.app.push_screen_wait(ConfirmScreen(f"Archive {label}? (only for you)", "Archive")):
            return
        if await self.act(self.client.archive_channel(channel.id)) is None:
            return
        self.set_current(None)
        self.messages = {}
        self.need_messages = True
        self.offer_undo(f"Archived {label}", lambda: self.client.unarchive_channel(channel.id))
        self.request_reload()

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and self.query_one("#chat-input", Input).has_focus:
            self.query_one("#chat-channels", DataTable).focus()
            event.stop()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "chat-input" and event.value and self.current:
            now = time.monotonic()
            if now - self._typing_sent > TYPING_SENT_EVERY:
                self._typing_sent = now
                self.send_typing(self.current)

    @work(group="chat-typing", exit_on_error=False)
    async def send_typing(self, channel_id: str) -> None:
        try:
            await self.client.typing(channel_id)
        except Exception:
            pass  # a lost typing hint is harmless

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "chat-input" or not event.value.strip() or not self.current:
            return
        body = event.value
        event.input.value = ""
        self._typing_sent = 0.0
        self.send_message(self.current, body)

    @work(group="chat-send", exit_on_error=False)
    async def send_message(self, channel_id: str, body: str) -> None:
        message = await self.act(self.client.post_chat(channel_id, body))
        if isinstance(message, ChatMessage):
            self.messages[message.id] = message
            self.render_messages()
        else:
            self.restore_draft(channel_id, body)

    def restore_draft(self, channel_id: str, body: str) -> None:
        """A message the server refused or never got goes back into its channel's input, ahead of anything
        typed since; when another channel is open meanwhile, into that channel's draft."""
        if channel_id != self.current:
            kept = self.drafts.get(channel_id)
            self.drafts[channel_id] = f"{body} {kept}" if kept else body
            channel = self.channels.get(channel_id)
            where = channel.label(self.session.identity or "") if channel else channel_id
            self.notify(f"Kept as a draft in {where}", timeout=4)
            return
        box = self.query_one("#chat-input", Input)
        box.value = f"{body} {box.value}" if box.value else body
        box.cursor_position = len(body)

    @work(group="chat-action", exit_on_error=False)
    async def action_open_dm(self) -> None:
        channel_id = await self.app.push_screen_wait(FormScreen("Direct message", [
            Field("identity", "With", required=True, names=True)], "Open", submit=lambda v: self.client.open_dm(v["identity"])))
        if isinstance(channel_id, str):
            self.open_for_reading(channel_id)
