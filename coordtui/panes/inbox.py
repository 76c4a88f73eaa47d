"""Inbox: unread first, a thread view, compose, reply, ack, pending toggle and search."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message as TextualMessage
from textual.widgets import DataTable, Input, Static

from ..agentmark import named
from ..client import limits
from ..client.api import ApiError, ConnectionFailed
from ..client.models import Message, age_text
from ..screens.confirm import ConfirmScreen
from ..screens.form import Field, FormScreen, forwarded, reply_form
from ..screens.page_links import linked, text_links, use_links
from ..session import Session
from .base import Pane
from ..tables import PlainTable, cursor_key, jump_to_next


def order_inbox(messages: list[Message]) -> list[Message]:
    """Unread first (urgent, then oldest), then the rest newest first."""
    seen, unique = set(), []
    for message in messages:
        if message.id not in seen:
            seen.add(message.id)
            unique.append(message)
    unread = sorted((m for m in unique if m.unread), key=lambda m: (not m.urgent, m.created_at or 0, str(m.id)))
    read = sorted((m for m in unique if not m.unread), key=lambda m: (m.created_at is None, m.created_at), reverse=True)
    return unread + read


def thread_key(message: Message) -> str:
    return message.thread_id or str(message.id)


MailData = tuple[list[Message], list[Message], int]  # received (in order), sent, unread count


class InboxPane(Pane[MailData]):
    EMPTY_HINT = "Mail sent to you, by people or agents, appears here. c writes one."
    EVENT_TYPES = frozenset({"message", "inbox_check", "resync", "reconnected"})
    KEYS = [("enter", "open: show the thread and mark it read (keys.toml open_marks_read)"), ("c", "compose"),
            ("r", "reply (quoting the message)"), ("f", "forward"),
            ("o / y", "open / copy the message's link (a chooser when it has several)"), ("a", "acknowledge"), ("A", "mark all read (asks first)"), ("p", "toggle pending"),
            ("n / N", "next / previous unread"), ("s", "sent mail / received mail"),
            ("/", "search (enter; escape clears)"), ("ctrl+e", "in a form: write the body in $EDITOR")]
    BINDINGS = [Binding("c", "compose", "Compose", id="inbox.compose"), Binding("r", "reply", "Reply", id="inbox.reply"),
                Binding("f", "forward", "Forward", show=False, id="inbox.forward"),  # in help (?); the bar keeps Pending
                Binding("o", "links('open')", "Open link", show=False, id="inbox.open_link"),
                Binding("y", "links('copy')", "Copy link", show=False, id="inbox.copy_link"),
                Binding("a", "ack", "Ack", id="inbox.ack"), Binding("A", "ack_all", "Ack all", show=False, id="inbox.ack_all"),
                Binding("p", "pending", "Pending", id="inbox.pending"),
                Binding("n", "next_unread(1)", "Next unread", show=False, id="inbox.next_unread"),
                Binding("N", "next_unread(-1)", "Prev unread", show=False, id="inbox.prev_unread"),
                Binding("s", "toggle_sent", "Sent", id="inbox.sent"),
                Binding("slash", "search", "Search", id="inbox.search")]

    @dataclass
    class MailCounted(TextualMessage):
        """The pane loaded the inbox: `unread` messages wait (the Inbox badge says the same)."""
        unread: int

    def __init__(self, session: Session, *, title: str, id: str) -> None:
        super().__init__(session, title=title, id=id)
        self.messages: dict[int, Message] = {}
        self.sent: list[Message] = []
        self.query_text = ""
        self.view = "received"  # or "sent"
        self.to_select: int | None = None  # opened from Wake: selected once a load lists it
        self.to_select_by = 0

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search mail (enter), escape to clear", id="inbox-search", classes="hidden")
        yield Static("", id="inbox-summary", classes="pane-summary")
        with Horizontal(classes="split"):
            table = PlainTable(id="inbox-table", cursor_type="row", classes="list")
            table.add_columns(*self.columns())
            yield table
            with VerticalScroll(id="inbox-thread", classes="detail"):
                yield Static("Select a message.", id="inbox-thread-text")

    def columns(self) -> tuple[str, ...]:
        """Received mail names its sender, sent mail its recipients."""
        return (" ", "From" if self.view == "received" else "To", "Title", "Age")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Reply and ack act on mail received: in Sent they are neither offered nor bound."""
        if action in ("reply", "ack") and self.view == "sent":
            return False
        return super().check_action(action, parameters)

    async def load(self) -> MailData:
        if self.query_text:
            found = await self.client.search_inbox(self.query_text)
            return found, [], len(found)
        unread = await self.client.inbox("unread", limit=100)  # urgent first, then oldest: the first 100 to act on
        everything = await self.client.inbox(limit=100)
        sent: list[Message]
        try:
            sent = await self.client.sent(limit=100)
        except ApiError as exc:  # (ours) on other v1 servers? the thread view then shows received mail only
            if not exc.unsupported:
                raise
            sent = []
        return order_inbox(unread.messages + everything.messages), sent, unread.total

    def show(self, data: MailData) -> None:
        messages, self.sent, unread = data
        if not self.query_text:
            self.post_message(self.MailCounted(unread))
        if self.view == "sent":
            messages = self.sent
        table = self.query_one("#inbox-table", DataTable)
        selected = self.selected()
        table.clear(columns=self.columns() != tuple(str(c.label) for c in table.columns.values()))
        if not table.columns:
            table.add_columns(*self.columns())
        self.messages = {}
        now = self.session.now()
        for message in messages:
            self.messages[message.id] = message
            flag = Text("!", style="bold red") if message.urgent and message.unread else (
                Text("●", style="bold cyan") if message.unread else Text(" "))
            if message.response_waiting:
                flag = Text("⏳" if not message.unread else "●⏳", style="yellow")
            style = "bold" if message.unread and self.view == "received" else ""
            who = named(message.sender, message.from_is_agent) if self.view == "received" else message.recipient
            table.add_row(flag, Text(who, style=style), Text(message.title, style=style),
                          age_text(message.created_at, now), key=str(message.id))
        label = f"search “{self.query_text}”: {len(messages)} found" if self.query_text else \
            f"{unread} unread · {len(messages)} shown"
        if self.view == "sent":
            label = f"sent: {len(messages)} shown (s: received mail)"
        self.query_one("#inbox-summary", Static).update(label)
        self._place_cursor(table, selected)
        self.show_thread()

    def _place_cursor(self, table: DataTable[Any], selected: Message | None) -> None:
        """On the message opened from Wake once it is listed, else where it was before the refill."""
        if self.to_select is not None and self.loads >= self.to_select_by and self.to_select not in self.messages:
            self.to_select = None  # not among the messages listed: the cursor stays where it was
        target = self.to_select if self.to_select in self.messages else (selected.id if selected else None)
        if target in self.messages:
            table.move_cursor(row=table.get_row_index(str(target)))
        if target is not None and target == self.to_select:
            table.focus()
            self.to_select = None
            self.open_selected()  # opened from Wake: as if enter were pressed on it

    def selected(self) -> Message | None:
        key = cursor_key(self.query_one("#inbox-table", DataTable))
        return self.messages.get(int(key)) if key and key.isdigit() else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.open_selected()

    def open_selected(self) -> None:
        """Opening a message (enter, or from Wake): the thread shows, and (unless keys.toml says otherwise) it is
        marked read."""
        message = self.selected()
        if message is None:
            return
        self.show_thread()
        if message.unread and self.view == "received" and self.session.open_marks_read:
            self.mark_read(message.id)

    @work(group="inbox-read", exit_on_error=False)
    async def mark_read(self, message_id: int) -> None:
        if await self.act(self.client.ack(message_id)):
            self.request_reload()

    def action_next_unread(self, step: int) -> None:
        table = self.query_one("#inbox-table", DataTable)
        keys = [k.value for k in table.rows]
        unread = [i for i, k in enumerate(keys) if k and k.isdigit() and self.messages[int(k)].unread]
        if not unread or self.view != "received":
            self.notify("No unread mail", timeout=2)
            return
        jump_to_next(table, unread, step)

    def action_toggle_sent(self) -> None:
        self.view = "sent" if self.view == "received" else "received"
        self.refresh_bindings()
        if self._last_data is not None:
            self.show(self._last_data)

    @work(group="inbox-action", exit_on_error=False)
    async def action_ack_all(self) -> None:
        try:
            unread = await self.client.inbox_all("unread")
        except (ApiError, ConnectionFailed) as exc:  # said once, nothing changed
            self.notify(str(exc), severity="error", timeout=5)
            return
        if not unread:
            self.notify("No unread mail", timeout=2)
            return
        noun = "message" if len(unread) == 1 else "messages"
        if not await self.app.push_screen_wait(ConfirmScreen(f"Mark all {len(unread)} unread {noun} read?",
                                                             "Mark read")):
            return
        done = await self.act(self.client.ack_many([m.id for m in unread]))
        if isinstance(done, dict) and done:
            self.notify(f"Marked {len(done.get('success') or [])} read", timeout=3)
            self.request_reload()

    def select_message(self, message_id: int) -> None:
        """Puts the cursor on a received message: now if it is listed, else when the next load lists it
        (a load already running may predate it: the one after that is the last asked)."""
        self.to_select = message_id
        self.to_select_by = self.loads + (2 if self.busy else 1)
        self.view = "received"
        self.refresh_bindings()
        if self._last_data is not None:
            self.show(self._last_data)

    def show_thread(self) -> None:
        message = self.selected()
        target = self.query_one("#inbox-thread-text", Static)
        if message is None:
            target.update("Select a message." if self.messages else "No messages.")
            return
        key = thread_key(message)
        thread = [m for m in list(self.messages.values()) + self.sent if thread_key(m) == key or str(m.id) == key]
        unique = {m.id: m for m in thread}
        ordered = sorted(unique.values(), key=lambda m: (m.created_at is None, m.created_at))
        now = self.session.now()
        parts = []  # Text, never markup: names, titles and bodies are other identities' text
        for item in ordered:
            marker = "→" if item.sender == self.session.identity else "←"
            head = Text.assemble((f"{marker} {named(item.sender, item.from_is_agent)} → {item.recipient}", "bold"),
                                 (f"  {age_text(item.created_at, now)} ago", "dim"))
            if item.urgent:
                head.append("  urgent", "red")
            if item.response_waiting:
                head.append("  pending", "yellow")
            parts.append(Text("\n").join([head, linked(item.title, "bold"), linked(item.body)]))
        target.update(Text("\n\n").join(parts))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_thread()

    def action_search(self) -> None:
        search = self.query_one("#inbox-search", Input)
        search.remove_class("hidden")
        search.cursor_blink = False
        search.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "inbox-search":
            self.query_text = event.value.strip()
            if not self.query_text:
                event.input.add_class("hidden")
            self.query_one("#inbox-table", DataTable).focus()
            self.request_reload()

    def on_key(self, event: events.Key) -> None:
        search = self.query_one("#inbox-search", Input)
        if event.key == "escape" and (search.has_focus or self.query_text):
            search.value = ""
            search.add_class("hidden")
            self.query_text = ""
            self.query_one("#inbox-table", DataTable).focus()
            self.request_reload()
            event.stop()

    @work(group="inbox-action", exit_on_error=False)
    async def action_compose(self, recipient: str = "", title: str = "", body: str = "") -> None:
        sent = await self.app.push_screen_wait(FormScreen("New message", [
            Field("recipient", "To", recipient, required=True, names=True),
            Field("title", "Title", title, required=True, max_len=limits.MESSAGE_TITLE),
            Field("body", "Body", body, kind="text", max_len=limits.MESSAGE_BODY),
            Field("urgent", "Urgent", False, kind="check")], "Send",
            submit=lambda v: self.client.send(v["recipient"], v["title"], v["body"], bool(v["urgent"]))))
        if sent:
            self.notify(f"Sent to {sent.recipient}", timeout=3)
            self.request_reload()

    @work(group="inbox-action", exit_on_error=False)
    async def action_reply(self) -> None:
        message = self.selected()
        if message is None:
            return
        about = f"{message.sender}: {message.title}"
        quoting = message.body if self.view == "received" else ""
        if await self.app.push_screen_wait(reply_form(self.client, message.id, about, quoting)):
            self.notify("Reply sent", timeout=3)
            self.request_reload()

    def action_links(self, how: Literal["open", "copy"]) -> None:
        message = self.selected()
        if message is not None:
            use_links(self.app, text_links(f"{message.title}\n{message.body}"), how, "this message")

    def action_forward(self) -> None:
        """The selected message (received or sent) as a new message: "Fwd:" title, the original below a line
        naming who sent it and when; To is left to fill in."""
        message = self.selected()
        if message is None:
            return
        sent_at = f"{message.created_at.astimezone():%Y-%m-%d %H:%M}" if message.created_at else ""
        title = message.title if message.title.startswith("Fwd: ") else f"Fwd: {message.title}"
        self.action_compose(title=title[:limits.MESSAGE_TITLE],
                            body=forwarded(message.sender, sent_at, message.title, message.body))

    @work(group="inbox-action", exit_on_error=False)
    async def action_ack(self) -> None:
        message = self.selected()
        if message is None:
            return
        if await self.act(self.client.ack(message.id), f"Acknowledged {message.id}"):
            self.request_reload()

    @work(group="inbox-action", exit_on_error=False)
    async def action_pending(self) -> None:
        message = self.selected()
        if message is None:
            return
        waiting = not message.response_waiting
        if await self.act(self.client.set_pending(message.id, waiting), "Marked pending" if waiting else None):
            if not waiting:
                self.offer_undo(f"No longer pending: {message.title}",
                                      lambda: self.client.set_pending(message.id, True))
            self.request_reload()
