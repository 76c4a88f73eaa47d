"""Wake: everything waiting for you, grouped by source, high priority first, with ages."""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import groupby
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.timer import Timer
from textual.message import Message
from textual.widgets import DataTable, Static

from ..client import limits
from ..client.api import ApiError
from ..client.transitions import step
from ..client.models import (PRIORITY_RANK, Channel, ServerEvent, Wake, WakeItem, age_text, counted, numbered,
                             parse_time)
from ..screens.form import Field, FormScreen, answer_text_form, reply_form
from ..screens.task_move import move_task_dialog
from ..session import Session
from .base import Pane
from ..tables import SectionedTable, cursor_key, jump_to_next

ACKED_ELSEWHERE = "alert_acked"  # an open alert shown here that someone else acked meanwhile: no longer urgent
ACKED_SHOWN_FOR = timedelta(minutes=30)  # how long such an alert stays listed, unless it changes again
SOURCE_ORDER = {"guard": -1, "ask": 0, "backup": 1, "alert": 2, "buzz": 3, "message": 4, "message_pending": 5,
                "ask_result": 6, "chat": 7, "lease_expired": 8, "reservation_expired": 9,
                "reservation_expiring": 10, "swarm": 11, ACKED_ELSEWHERE: 12}
UNREAD_SOURCES = frozenset({"buzz", "message", "chat"})  # what n/N visit: alerts, unread mail, unread chat
SOURCE_TITLES = {"guard": "Loop guards (agents looping: wakes held)", "ask": "Questions for you (1-9 answers)",
                 "backup": "Backup", "alert": "Open alerts (a acks)", ACKED_ELSEWHERE: "Acked by others (a hides)",
                 "buzz": "Buzz alerts",
                 "message": "Unread mail", "message_pending": "Awaiting your answer",
                 "ask_result": "Answers to your questions", "chat": "Unread chat",
                 "lease_expired": "Task leases ran out", "reservation_expired": "Reservations ran out",
                 "reservation_expiring": "Reservations about to run out", "swarm": "Tasks"}
PRIORITY_STYLE = {"high": "bold red", "normal": "yellow", "low": "dim"}
# What a person calls each kind of item (the server's source names are never shown)
SOURCE_WORDS = {"message": "a message", "message_pending": "a message", "buzz": "an alert", "alert": "an alert",
                ACKED_ELSEWHERE: "an alert", "swarm": "a task", "chat": "a chat", "ask": "a question",
                "ask_result": "an answer", "backup": "a backup alert", "guard": "a loop guard",
                "lease_expired": "a task lease", "reservation_expired": "a reservation",
                "reservation_expiring": "a reservation"}


def need_words(sources: tuple[str, ...]) -> str:
    """"a message or an alert": the kinds an action needs, in words, each once."""
    words = list(dict.fromkeys(SOURCE_WORDS.get(source, "an item") for source in sources))
    return " or ".join(words)


def group_items(items: list[WakeItem]) -> list[tuple[str, list[WakeItem]]]:
    ordered = sorted(items, key=lambda i: (SOURCE_ORDER.get(i.source, len(SOURCE_ORDER)), i.source,
                                           PRIORITY_RANK.get(i.priority, 1)))
    return [(source, list(group)) for source, group in groupby(ordered, key=lambda i: i.source)]


def item_text(item: WakeItem) -> Text:
    """The row's text: an ask put to me shows the digit of each option after its question; an alert how often it
    fired and its state."""
    text = Text(item.summary)
    if item.source == "ask" and (item.options or item.allow_text):
        choices = numbered(item.options) + (" · t in words" if item.allow_text else "")
        text.append(f"  [{choices.lstrip(' ·')}]", style="bold cyan")
    elif item.source == "alert" and item.count is not None:
        said = [] if "firing" in item.summary else [counted(item.count, "firing")]  # the server's summary may say it
        said += [item.alert_state or "open"] + (["escalated to you"] if item.escalated else [])
        text.append(f"  [{' · '.join(said)}]", style="bold yellow")
    elif item.source == ACKED_ELSEWHERE:
        text.append(f"  [{item.status}]", style="green")
    return text


@dataclass(frozen=True)
class AckedElsewhere:
    """An alert item that was on screen when someone else acked it (an `alert_changed` event)."""
    item: WakeItem
    by: str
    at: datetime

    def shown(self, now: datetime) -> WakeItem:
        return replace(self.item, source=ACKED_ELSEWHERE, priority="low", age=age_text(self.at, now) or "0m",
                       status=f"acked by {self.by} {age_text(self.at, now) or '0m'}")


class WakePane(Pane[Wake]):
    ANSWER_GRACE = 3.0  # seconds a digit's answer waits before it is sent (u takes it back)
    EMPTY_HINT = "Mail, tasks, questions and alerts for you land here. C connects an agent."
    EVENT_TYPES = frozenset({"message", "swarm_task_created", "swarm_task_updated", "broadcast", "resync",
                             "reconnected", "ask", "ask_answered", "ask_expired", "ask_cancelled", "ask_read",
                             "alert_changed", "guard", "guard_cleared"})
    KEYS = [("enter", "open the item (chat: the channel)"), ("/", "filter"),
            ("a", "acknowledge a message / ack an open alert / dismiss a buzz alert"), ("p", "mark/unmark a message pending"),
            ("r", "reply to a message"), ("c", "claim / start a task"), ("m", "move a task"),
            ("t", "create a task from a buzz alert / answer a question in words"),
            ("1-9", "answer the highlighted question with that option (other rows: switch pane)"),
            ("A", "all questions to and from you (batch answer)"), ("Q", "ask someone a question"),
            ("n / N", "next / previous unread item (alert, mail, chat)"),
            ("C", "connect an agent: its token and MCP configuration (admin)")]
    BINDINGS: ClassVar[list[BindingType]] = [Binding("a", "ack", "Ack", id="wake.ack"), Binding("p", "pending", "Pending", show=False, id="wake.pending"),
                Binding("r", "reply", "Reply", id="wake.reply"), Binding("c", "claim", "Claim", id="wake.claim"),
                Binding("m", "move", "Move", id="wake.move"),
                Binding("t", "task_from_alert", "Task", id="wake.task"),
                Binding("A", "ops('asks')", "Asks", show=False, id="wake.asks"),
                Binding("Q", "ops('ask')", "Ask", show=False, id="wake.ask"),
                Binding("n", "next_unread(1)", "Next unread", show=False, id="wake.next_unread"),
                Binding("N", "next_unread(-1)", "Prev unread", show=False, id="wake.prev_unread"),
                Binding("C", "ops('connect')", "Connect agent", show=False, id="wake.connect"),
                *(Binding(str(n), f"answer({n})", f"Answer {n}", show=False, id=f"wake.answer_{n}")
                  for n in range(1, 10))]

    @dataclass
    class Shown(Message):
        """The pane showed `wake` (the server's answer or pulse; `channels` fetched with it from an older server
        whose wake has no chat items): its one-shot items are kept, and the Wake badge counts it."""
        wake: Wake
        channels: list[Channel] | None

    @dataclass
    class Painted(Message):
        """A wake list reached the screen (the first one's time is measured: bench/tui.py)."""

    @dataclass
    class ItemOpened(Message):
        """enter on an item: where it leads (the channel, the message, the task)."""
        item: WakeItem

    @dataclass
    class AlertDismissed(Message):
        """`a` on a kept alert: it leaves the alert store."""
        key: str

    def __init__(self, session: Session, *, title: str, id: str) -> None:
        super().__init__(session, title=title, id=id)
        self.wake: Wake | None = None
        self.items: dict[str, WakeItem] = {}
        self._channels: list[Channel] | None = None  # fetched by load() with the wake it returns (older servers)
        self._signature: tuple[object, ...] = ()
        self.answering: dict[str, tuple[Timer, str]] = {}  # item key -> (the timer that sends it, the option)
        self.acked_elsewhere: dict[str, AckedElsewhere] = {}  # alert item key -> who acked it, when
        # one-shot items shown before the app's alert store keeps them (it does on our Shown message): a second
        # answer painted first, without them (they were delivered), must not drop them from the list meanwhile
        self.arriving: dict[str, WakeItem] = {}

    def compose(self) -> ComposeResult:
        yield Static("Loading…", id="wake-summary", classes="pane-summary")
        table = SectionedTable(id="wake-table", cursor_type="row", zebra_stripes=False)
        table.add_columns("Pri", "Age", "Item")
        yield table

    async def load(self) -> Wake:
        wake = await self.client.wake()
        self._channels = None
        if not any(item.source == "chat" for item in wake.items):  # an older server: chat from the channels
            self._channels = await self.client.channels()
        return wake

    def show(self, wake: Wake) -> None:
        # the channels fetched with this wake, once: a wake shown again (a filter) is viewed with the counted ones
        channels, self._channels = self._channels, None
        self.post_message(self.Shown(wake, channels))
        self.arriving |= {item.key: item for item in self.session.alerts.without_dismissed(wake).items if item.ephemeral}
        self.paint(self.view(wake, channels))

    def view(self, wake: Wake, channels: list[Channel] | None = None) -> Wake:
        """The session's view of a wake answer (Session.wake_view: with chat and the kept alerts), with the
        one-shot items still on their way to the alert store."""
        kept = {alert.item.key for alert in self.session.alerts.alerts()}
        self.arriving = {key: item for key, item in self.arriving.items() if key not in kept}
        view = self.session.wake_view(wake, channels)
        present = {item.key for item in view.items}
        missing = [item for key, item in self.arriving.items() if key not in present]
        return replace(view, items=view.items + missing) if missing else view

    def paint(self, wake: Wake) -> None:
        """The wake list as shown (the server's, with chat items and kept alerts: Session.wake_view, and the
        alerts others acked while they were on screen)."""
        wake = self.with_acked_elsewhere(wake)
        self.wake = wake
        summary = wake.summary or "All clear: nothing is waiting for you."
        if wake.hidden_text():
            summary = f"{summary} · {wake.hidden_text()}"
        if self.filter_text:
            summary = f"filter “{self.filter_text}” · {summary}"
        self.query_one("#wake-summary", Static).update(Text(summary))
        signature = (self.filter_text,) + tuple((i.key, i.priority, i.age, i.summary) for i in wake.items)
        if signature != self._signature:  # bursts often change only the counts in the summary
            self._signature = signature
            self._fill_table(wake)
        self.call_after_refresh(self.post_message, self.Painted())

    def _fill_table(self, wake: Wake) -> None:
        table = self.query_one("#wake-table", DataTable)
        selected = self.selected_key()
        table.clear()
        self.items = {}
        shown = [i for i in wake.items if self.matches(i.summary, i.source, SOURCE_TITLES.get(i.source, ""))]
        for source, items in group_items(shown):
            table.add_row(Text(""), Text(""), Text(f"── {SOURCE_TITLES.get(source, source)} ({len(items)})", style="bold"),
                          key=f"{SectionedTable.SECTION}{source}")
            for item in items:
                self.items[item.key] = item
                text = item_text(item)
                if item.key in self.answering:
                    text.append(f"  → answering: {self.answering[item.key][1]} (u takes it back)", style="bold yellow")
                table.add_row(Text(item.priority, style=PRIORITY_STYLE.get(item.priority, "")), item.age,
                              text, key=item.key)
        if selected and selected in self.items:
            table.move_cursor(row=table.get_row_index(selected))
        elif self.items:
            # A question is answered only once the cursor was put on it: listed first, it is not where the
            # cursor starts (the header is), so a digit pressed to switch panes switches panes.
            first_is_question = next(iter(self.items.values())).source == "ask"
            table.move_cursor(row=0 if first_is_question else 1)

    def with_acked_elsewhere(self, wake: Wake) -> Wake:
        """Alerts someone else acked while listed leave the open alerts for a low line saying who (for
        ACKED_SHOWN_FOR, or until the alert changes again)."""
        now = self.session.now()
        for key, acked in list(self.acked_elsewhere.items()):
            if now - acked.at > ACKED_SHOWN_FOR:
                del self.acked_elsewhere[key]
        if not self.acked_elsewhere:
            return wake
        items = [i for i in wake.items if i.key not in self.acked_elsewhere]
        return replace(wake, items=items + [a.shown(now) for a in self.acked_elsewhere.values()])

    def alert_changes(self, events: list[ServerEvent]) -> bool:
        """`alert_changed` events: an alert on screen acked by someone else is kept as such; any other change of
        it ends that. True when what is shown changed."""
        changed = False
        for event in events:
            if event.type != "alert_changed":
                continue
            key = f"alert:{event.data.get('alertId')}"
            by = event.data.get("by")
            shown = self.items.get(key)
            if event.data.get("change") == "acked" and by and by != self.session.identity and shown is not None \
                    and shown.source == "alert":
                alert = event.data.get("alert") if isinstance(event.data.get("alert"), dict) else {}
                at = parse_time((alert or {}).get("ackedAt")) or self.session.now()
                self.acked_elsewhere[key] = AckedElsewhere(shown, str(by), at)
                changed = True
            elif event.data.get("change") != "acked" and self.acked_elsewhere.pop(key, None) is not None:
                changed = True
        return changed

    def handle_events(self, events: list[ServerEvent]) -> None:
        if self.alert_changes(events) and self.wake is not None:
            self.repaint_view()
        pulses = [e for e in events if e.type == "wake_pulse"]
        if pulses:
            if self.active:
                self.render_data(Wake.parse(pulses[-1].data))
            else:
                self.stale = True
        super().handle_events(events)

    def concerns(self, event: ServerEvent) -> bool:
        return event.type in self.EVENT_TYPES or (event.type == "inbox_check" and event.data.get("action") == "ack")

    def selected_key(self) -> str | None:
        return cursor_key(self.query_one("#wake-table", DataTable))

    def selected(self) -> WakeItem | None:
        key = self.selected_key()
        return self.items.get(key) if key else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        item = self.items.get(event.row_key.value or "")
        if item is not None:
            self.post_message(self.ItemOpened(item))

    def action_next_unread(self, step: int) -> None:
        """The next (step 1) or previous (-1) alert, unread mail or chat row, wrapping around; headers skipped."""
        table = self.query_one("#wake-table", DataTable)
        keys = [row_key.value for row_key in table.rows]
        unread = [row for row, key in enumerate(keys) if key in self.items and self.items[key].source in UNREAD_SOURCES]
        if not unread:
            self.notify("Nothing unread", timeout=2)
            return
        jump_to_next(table, unread, step)

    def _need(self, *sources: str) -> WakeItem | None:
        item = self.selected()
        if item is None or item.source not in sources:
            self.notify(f"Select {need_words(sources)} first", severity="warning", timeout=3)
            return None
        return item

    def action_answer(self, option: int) -> None:
        """A digit on a question put to me answers it with that option, after ANSWER_GRACE seconds in which u
        takes it back (a digit pressed by reflex to switch panes must not decide for anyone); elsewhere the
        key does what the app binds it to (switching panes)."""
        item = self.selected()
        if item is None or item.source != "ask" or option > len(item.options):
            raise SkipAction()
        label = item.options[option - 1]
        earlier = self.answering.pop(item.key, None)
        if earlier is not None:
            earlier[0].stop()
        timer = self.set_timer(self.ANSWER_GRACE, lambda: self.answer(item, option))
        self.answering[item.key] = (timer, label)

        async def take_back() -> None:
            pending = self.answering.pop(item.key, None)
            if pending is None:
                raise ApiError(409, "the answer was sent already")
            pending[0].stop()
            self.repaint()
        self.offer_undo(f"Answering {item.asker}: {label}", take_back)
        self.repaint()

    def repaint(self) -> None:
        if self.wake is not None:
            self._fill_table(self.wake)

    def repaint_view(self) -> None:
        """The last wake list shown again (an alert acked elsewhere joins or leaves its group)."""
        if self._last_data is not None:
            self.paint(self.view(self._last_data))

    @work(group="wake-action", exit_on_error=False)
    async def answer(self, item: WakeItem, option: int) -> None:
        if self.answering.pop(item.key, None) is None:
            return  # taken back
        label = item.options[option - 1]
        if await self.act(self.client.answer_ask(item.id, option=option), f"Answered {item.asker}: {label}"):
            self.request_reload()
        else:
            self.repaint()

    @work(group="wake-action", exit_on_error=False)
    async def answer_in_words(self, item: WakeItem) -> None:
        if await self.app.push_screen_wait(answer_text_form(self.client, item.id, item.question or item.summary)):
            self.notify(f"Answered {item.asker}", timeout=3)
            self.request_reload()

    @work(group="wake-action", exit_on_error=False)
    async def action_ack(self) -> None:
        item = self._need("message", "message_pending", "buzz", "alert", ACKED_ELSEWHERE)
        if item is None:
            return
        if item.source == "buzz":
            self.dismiss_alert(item)
            return
        if item.source == ACKED_ELSEWHERE:
            self.acked_elsewhere.pop(f"alert:{item.id}", None)
            self.repaint_view()
            return
        if item.source == "alert":
            if await self.act(self.client.ack_alert(int(item.id)), f"Acked: {item.title or item.summary}"):
                self.request_reload()
            return
        if await self.act(self.client.ack(item.id), f"Acknowledged message {item.id}"):
            self.request_reload()

    def dismiss_alert(self, item: WakeItem) -> None:
        """The alert leaves the store (the app's, which then shows Wake again: the summary and the badge count one
        less) and the list (here, at once)."""
        self.post_message(self.AlertDismissed(item.key))
        self.arriving.pop(item.key, None)
        if self.wake is not None:
            self.paint(replace(self.wake, items=[i for i in self.wake.items if i.key != item.key]))

    @work(group="wake-action", exit_on_error=False)
    async def action_pending(self) -> None:
        item = self._need("message", "message_pending")
        if item is None:
            return
        waiting = item.source != "message_pending"
        text = "Marked pending" if waiting else "No longer pending"
        if await self.act(self.client.set_pending(item.id, waiting), f"{text}: message {item.id}"):
            self.request_reload()

    @work(group="wake-action", exit_on_error=False)
    async def action_reply(self) -> None:
        item = self._need("message", "message_pending")
        if item is None:
            return
        if await self.app.push_screen_wait(reply_form(self.client, item.id, item.summary)):
            self.notify("Reply sent", timeout=3)
            self.request_reload()

    @work(group="wake-action", exit_on_error=False)
    async def action_claim(self) -> None:
        item = self._need("swarm")
        if item is None:
            return
        target = step(item.status or "ready", 1)  # the server's wake lists ready, in_progress and review tasks
        if target is None:
            self.notify(f"No next step from {item.status}: m moves it", severity="warning", timeout=3)
            return
        if await self.act(self.client.move_task(str(item.id), target), f"{item.summary} → {target}"):
            self.request_reload()

    @work(group="task-move", exit_on_error=False)
    async def action_move(self) -> None:
        item = self._need("swarm")
        if item is not None and await move_task_dialog(self, self.client, str(item.id), item.summary, item.status):
            self.request_reload()

    @work(group="wake-action", exit_on_error=False)
    async def action_task_from_alert(self) -> None:
        """t: a task from the highlighted alert; on a question that may be answered in words, that answer."""
        asked = self.selected()
        if asked is not None and asked.source == "ask" and asked.allow_text:
            self.answer_in_words(asked)
            return
        item = self._need("buzz")
        if item is None:
            return
        created = await self.app.push_screen_wait(FormScreen("New task from alert", [
            Field("title", "Title", item.summary[:limits.TASK_TITLE], required=True, max_len=limits.TASK_TITLE),
            Field("detail", "Detail", f"From buzz event {item.id} ({item.app_name or 'buzz'})\n\n", kind="text",
                  max_len=limits.TASK_DETAIL, type_after=True),
            Field("assignee", "Assignee", self.session.identity or "", names=True)], "Create",
            submit=lambda v: self.client.create_task(v["title"], detail=v["detail"] or None,
                                                     assigneeUserId=v["assignee"] or None)))
        if created:
            self.notify("Task created", timeout=3)
            self.dismiss_alert(item)
            self.request_reload()
