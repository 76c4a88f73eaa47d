"""The coordtui App: connection state, the panes, and events routed to them in batches."""
from __future__ import annotations

import asyncio
import time
from collections import deque
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Select, Static, TabbedContent, TabPane

from .alerts import AlertStore, store_path
from .client import limits
from .client.api import ApiError, ConnectionFailed, CoordClient
from .client.events import CONNECTED, CONNECTING, DISCONNECTED, RECONNECTING, REFUSED, EventStream
from .client.models import ServerEvent, Task, Wake, WakeItem, counted
from .client.transitions import allowed_moves
from .config import Profile
from .keybar import KeyBar
from .keys import load_keys, unknown_ids
from .live import LiveMixin
from .ops.commands import OpsActions, OpsCommands
from .panes.base import Pane
from .panes.buzz import BuzzPane
from .panes.chat import ChatPane
from .panes.directory import DirectoryPane
from .panes.doctor import DoctorPane
from .panes.inbox import InboxPane
from .panes.notebook import NotebookPane
from .panes.presence import PresencePane
from .panes.swarm import SwarmPane
from .panes.wake import WakePane
from .screens.confirm import ConfirmScreen
from .screens.connect import ConnectScreen
from .screens.form import Field, FormScreen
from .screens.help import HelpScreen
from .screens.task_detail import TaskDetailScreen
from .tables import ListTree, PlainTable
from .typeahead import KeysInOrder

# One name per pane, short enough for nine tabs with badges in 80 columns: the tab, help and README use it.
PANES: list[tuple[str, str, type[Pane]]] = [
    (cls.ID, cls.TITLE, cls) for cls in (WakePane, InboxPane, ChatPane, SwarmPane, PresencePane, DoctorPane,
                                         NotebookPane, DirectoryPane, BuzzPane)]

STATE_LOOK = {CONNECTED: ("● connected", "green"), CONNECTING: ("◌ connecting", "yellow"),
              RECONNECTING: ("◌ reconnecting", "yellow"), DISCONNECTED: ("○ disconnected", "red"),
              REFUSED: ("✕ token refused", "red")}


class CoordApp(OpsActions, LiveMixin, KeysInOrder, App):
    CSS_PATH = "app.tcss"
    TITLE = "coord"
    COMMANDS = App.COMMANDS | {OpsCommands}
    # digits switch panes from lists; alt+digit (priority) from anywhere, inputs and editors included
    BINDINGS = [Binding(str(n), f"pane('{pid}')", label, show=False, id=f"app.pane.{pid}") for n, (pid, label, _) in
                enumerate(PANES, start=1)] + [
        Binding(f"alt+{n}", f"pane('{pid}')", label, show=False, priority=True) for n, (pid, label, _) in
        enumerate(PANES, start=1)] + [
        Binding("question_mark", "help", "Help", show=False, id="app.help"), Binding("ctrl+r", "reload", "Refresh", id="app.reload"),
        Binding("u", "undo", "Undo", show=False, id="app.undo"), Binding("escape", "leave_input", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True)]

    conn_state = reactive(CONNECTING)

    def __init__(self, profile: Profile | None, *, bell: bool = False, embedded=None,
                 clock: Callable[[], datetime] | None = None, batch_interval: float = 0.06,
                 stream: bool = True, backoff: tuple[float, float] = (0.25, 8.0), notify: bool = False):
        super().__init__()
        self.init_live(notify)
        self.key_config = load_keys()
        self.profile = profile
        self.ring_bell = bell
        self.embedded = embedded
        self.clock = clock
        self.batch_interval = batch_interval
        self.use_stream = stream
        self.backoff = backoff
        self.client: CoordClient | None = None
        self.identity: str | None = None
        self.is_admin = False
        self.stream: EventStream | None = None
        self.conn_detail = ""
        self._pending: list[ServerEvent] = []
        self._seen_urgent: set[str] | None = None
        self.alerts = AlertStore()  # one-shot wake items, kept whatever pane is active
        self._ever_connected = False
        self._quit_asked = False
        self.form_drafts: dict[str, dict] = {}  # cancelled forms' typed text, by form (screens/form.py)
        self.events_received = 0
        self.recent_events: deque[ServerEvent] = deque(maxlen=200)
        self.batches = 0
        self.first_wake_painted: float | None = None

    def now(self) -> datetime:
        return self.clock() if self.clock else datetime.now(timezone.utc)

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = False) -> None:
        """Every toast (widgets' notify() lands here too) is plain text: what toasts say is mostly the server's
        (titles, senders, error messages), and markup in it would be obeyed: `[link=URL]` shows one text and
        opens another. The text is already neutralised for the terminal by the SDK (client/safe_text.py)."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    # layout
    def compose(self) -> ComposeResult:
        with Horizontal(id="topbar"):
            yield Static("coord", id="brand")
            yield Static("", id="who")
            yield Static("", id="updated")
            yield Static("", id="conn")
        with TabbedContent(id="panes"):
            for number, (pane_id, label, cls) in enumerate(PANES, start=1):
                with TabPane(f"{number} {label}", id=f"tab-{pane_id}"):
                    yield cls(id=pane_id)
        yield KeyBar()

    def on_mount(self) -> None:
        self.render_connection()
        self.apply_keys()
        self.set_interval(self.batch_interval, self.flush_events)
        self.set_interval(1.0, self.render_updated)
        if self.profile is None:
            self.push_screen(ConnectScreen(), self.connect_to)
        else:
            self.connect_to(self.profile)

    def on_resize(self) -> None:
        self.render_badges()  # narrower or wider: the tab labels are fitted to the width

    def connect_to(self, profile: Profile | None) -> None:
        if profile is None:
            self.exit()
            return
        self.profile = profile
        self.client = CoordClient(profile.url, profile.token)
        self.start_session()

    def action_connect(self) -> None:
        """The palette's "Connect…": another URL, token or profile while running (escape keeps this one)."""
        self.push_screen(ConnectScreen(self.profile, cancel=True), self.switch_to)

    def switch_to(self, profile: Profile | None) -> None:
        if profile is not None:
            self.leave_session(profile)

    @work(exclusive=True, group="switch-session", exit_on_error=False)
    async def leave_session(self, profile: Profile) -> None:
        """Ends this connection (its stream and client), forgets who we were and what the panes showed, then
        connects with `profile`."""
        self.workers.cancel_group(self, "sse")
        self.stream = None
        if self.client is not None:
            await self.client.aclose()
        self.identity, self.is_admin, self._ever_connected = None, False, False
        self.conn_state, self.conn_detail = CONNECTING, ""
        for pane in self.panes():
            pane.stale = True
        self.connect_to(profile)

    @work(exclusive=True, group="session", exit_on_error=False)
    async def start_session(self) -> None:
        try:
            who = await self.client.verify()
        except ApiError as exc:
            self.conn_state, self.conn_detail = REFUSED, exc.message
            if exc.status in (401, 403):  # a wrong token: ask for another, saying why, the fields as they were
                self.push_screen(ConnectScreen(self.profile, f"Refused by the server: {exc.message}"),
                                 self.switch_to)
            else:
                self.notify(f"{exc.message}: check the token", title="Refused", severity="error", timeout=10)
            return
        except ConnectionFailed as exc:
            who = None
            self.conn_state, self.conn_detail = DISCONNECTED, str(exc)
        if who is not None:
            self.set_identity(who.identity, who.is_admin)
            if self.active_pane is not None:
                self.active_pane.request_reload()
        if self.use_stream:
            self.run_stream()

    @work(exclusive=True, group="sse", exit_on_error=False)
    async def run_stream(self) -> None:
        self.stream = EventStream(self.client.base_url, self.client.token, self.on_stream_event,
                                  self.on_stream_state, min_backoff=self.backoff[0], max_backoff=self.backoff[1])
        self.client.on_reachable = self.stream.retry_now
        await self.stream.run()

    async def on_unmount(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        if self.embedded is not None:
            await asyncio.to_thread(self.embedded.stop)  # --serve: the bundled server ends with the app

    # connection state
    def on_stream_state(self, state: str, detail: str) -> None:
        reconnected = state == CONNECTED and self.conn_state != CONNECTED and self._ever_connected
        if state == CONNECTED:
            self._ever_connected = True
            if self.identity is None and detail:
                self.identity = detail
                self.verify_later()
        self.conn_detail = detail
        self.conn_state = state
        if reconnected:
            self._pending.append(ServerEvent("reconnected", {}))

    def set_identity(self, identity: str, is_admin: bool) -> None:
        self.identity, self.is_admin = identity, is_admin
        self.alerts.attach(store_path(self.server_key(), identity))
        self.buzz_seen.attach(store_path(self.server_key(), identity, "buzz-seen"))
        self.render_connection()
        self.counts.due = True
        self.refresh_counts()

    def server_key(self) -> str:
        """What names this server across runs: the bundled server's port changes every start, its data dir does not."""
        if self.embedded is not None:
            return f"bundled:{Path(self.embedded.data_dir).resolve()}"
        return self.profile.url

    @work(group="session", exit_on_error=False)
    async def verify_later(self) -> None:
        try:
            who = await self.client.verify()
        except (ApiError, ConnectionFailed):
            return
        self.set_identity(who.identity, who.is_admin)
        for pane in self.panes():
            pane.stale = True
        if self.active_pane:
            self.active_pane.request_reload()

    def watch_conn_state(self) -> None:
        self.render_connection()

    def render_connection(self) -> None:
        if not self.is_mounted:
            return
        text, colour = STATE_LOOK.get(self.conn_state, (self.conn_state, "white"))
        self.query_one("#conn", Static).update(Text(text, style=f"bold {colour}"))
        who = ""
        if self.identity:
            who = f"{self.identity}{' (admin)' if self.is_admin else ''}"
        if self.profile is not None:
            where = self.profile.name if self.profile.name not in ("command line", "environment") else \
                self.profile.url.split("://", 1)[-1]
            who += f" @ {where}"
        self.query_one("#who", Static).update(who)

    # events, in batches
    def on_stream_event(self, event: ServerEvent) -> None:
        self.events_received += 1
        self.recent_events.append(event)
        self._pending.append(event)

    def flush_events(self) -> None:
        if not self._pending or not self._running:  # shutting down: the panes' widgets may be gone already
            return
        batch, self._pending = self._pending, []
        self.batches += 1
        for pane in self.panes():
            pane.handle_events(batch)
        self.note_events(batch)
        for event in batch:
            if event.type == "message" and event.data.get("urgent"):
                self.alert(f"Urgent from {event.data.get('sender')}: {event.data.get('title')}")
            elif event.type == "wake_pulse":
                self.wake_seen(Wake.parse(event.data))

    def wake_seen(self, wake: Wake) -> None:
        """Every wake answer and pulse passes here, whichever pane is active: one-shot items join the
        alert store, and high-priority items that were not there before toast (not on the first load)."""
        if self.alerts.absorb(wake, self.now()):
            for wake_pane in self.query(WakePane):
                if not wake_pane.active:
                    wake_pane.stale = True
        urgent = {i.key: i for i in wake.items if i.priority == "high"}
        if self._seen_urgent is not None:
            for key, item in urgent.items():
                if key not in self._seen_urgent and item.source != "message":  # mail toasts on its own event
                    self.alert(item.summary)
        self._seen_urgent = (self._seen_urgent or set()) | set(urgent)

    @on(BuzzPane.Viewed)
    def on_buzz_viewed(self, message: BuzzPane.Viewed) -> None:
        self.buzz_viewed(message.newest)

    def wake_painted(self) -> None:
        if self.first_wake_painted is None:
            self.first_wake_painted = time.perf_counter()

    def alert(self, text: str) -> None:
        self.notify(text, title="Urgent", severity="warning", timeout=8)
        self.send_desktop("Urgent", text)
        if self.ring_bell:
            self.bell()

    # panes
    def panes(self) -> list[Pane]:
        """From the panes' screen: events still reach them while a dialog is open."""
        return list(self.screen_stack[0].query(Pane)) if self.screen_stack else []

    @property
    def active_pane(self) -> Pane | None:
        if not self.is_mounted:
            return None
        try:  # the panes' screen, also while a dialog is on top of it
            main = self.screen_stack[0]
            active = main.query_one("#panes", TabbedContent).active
        except (IndexError, NoMatches):  # before the panes are composed, or torn down
            return None
        if not active:
            return None
        try:
            return main.query_one(f"#{active.removeprefix('tab-')}", Pane)
        except NoMatches:  # while the app is being torn down
            return None

    def pane(self, pane_id: str) -> Pane:
        return self.main_screen().query_one(f"#{pane_id}", Pane)

    def action_pane(self, pane_id: str) -> None:
        self.query_one("#panes", TabbedContent).active = f"tab-{pane_id}"

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pane = self.active_pane
        if pane is not None and self.client is not None:
            pane.activated()
            pane.focus_default()
            self.render_updated()

    async def action_quit(self) -> None:
        """Quitting would drop what was typed and not sent (notebook edits typed offline, an open form's text,
        chat drafts): ask first, naming it (ctrl+q again quits anyway)."""
        unsent = self.unsent_work()
        if not unsent or self._quit_asked:
            self.exit()
            return
        self._quit_asked = True

        def answered(yes: bool | None) -> None:
            self._quit_asked = False
            if yes:
                self.exit()
        what = unsent[0] if len(unsent) == 1 else ", ".join(unsent[:-1]) + " and " + unsent[-1]
        plural = len(unsent) > 1 or not (unsent[0].startswith(("1 ", "the ")))
        self.push_screen(ConfirmScreen(f"{what[0].upper()}{what[1:]} {'are' if plural else 'is'} not on the server "
                                       f"yet and would be lost. Quit anyway?", "Quit"), answered)

    def unsent_work(self) -> list[str]:
        """What quitting now would lose, in words ("3 notebook edits typed offline", "the text in the open form")."""
        lost = []
        try:
            edits = self.pane("notebook").unsent_edits()
            drafts = self.pane("chat").unsent_drafts()
        except NoMatches:
            edits = drafts = 0
        if edits:
            lost.append(f"{counted(edits, 'notebook edit')} typed offline")
        forms = [screen for screen in self.screen_stack if isinstance(screen, FormScreen)]
        if any(form.typed() for form in forms):
            lost.append("the text in the open form")
        kept = len(set(self.form_drafts) - {form.draft_key for form in forms})
        if kept:
            lost.append(counted(kept, "kept form draft"))
        if drafts:
            lost.append(f"{counted(drafts, 'chat draft')}")
        return lost

    def action_leave_input(self) -> None:
        """Escape in a pane's input or editor goes back to its list, so a digit then switches panes."""
        pane = self.active_pane
        if pane is not None:
            pane.focus_list()

    def apply_keys(self) -> None:
        """keys.toml overrides by binding id; a typo is reported, not fatal."""
        config = self.key_config
        known = binding_ids()
        problems = config.problems + [f"{config.path}: no binding named {name!r}"
                                      for name in unknown_ids(config, known)]
        self.set_keymap({k: v for k, v in config.keymap.items() if k in known})
        for problem in problems:
            self.notify(problem, title="keys.toml", severity="warning", timeout=8)

    def action_reload(self) -> None:
        pane = self.active_pane
        if pane is not None:
            pane.request_reload()

    def action_help(self) -> None:
        pane = self.active_pane
        self.push_screen(HelpScreen(pane, self.key_config))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for number, (pane_id, label, cls) in enumerate(PANES, start=1):
            yield SystemCommand(f"Pane: {cls.TITLE}", f"Show the {cls.TITLE} pane (key {number})",
                                lambda pane_id=pane_id: self.action_pane(pane_id))
        yield SystemCommand("Refresh pane", "Reload the active pane from the server (ctrl+r)", self.action_reload)
        yield SystemCommand("Keys", "List the keys (?)", self.action_help)
        yield SystemCommand("Connect…", "Another server URL, token or profile (this one ends)", self.action_connect)

    # cross-pane actions
    def open_wake_item(self, item: WakeItem) -> None:
        if item.source == "chat":
            self.open_chat_item(item)
        elif item.source in ("message", "message_pending"):
            inbox = self.pane("inbox")
            inbox.select_message(item.id)
            self.action_pane("inbox")
            inbox.request_reload()
        elif item.source == "swarm":
            self.open_task(str(item.id))
        else:
            self.notify(f"{item.summary}\n\n{item.action}", title=item.source, timeout=10)

    def open_task(self, task_id: str) -> None:
        self.push_screen(TaskDetailScreen(task_id))

    @work(group="task-move", exit_on_error=False)
    async def move_task(self, task_id: str, status: str, reason: str | None = None, assignee: str | None = None,
                        on_done: Callable | None = None) -> None:
        if status == "holding" and not reason:
            task = await self.push_screen_wait(FormScreen("Why is it holding?", [
                Field("reason", "Reason", required=True, max_len=limits.TASK_REASON)], "Move",
                submit=lambda v: self.client.move_task(task_id, status, v["reason"], assignee)))
        else:
            try:
                task = await self.client.move_task(task_id, status, reason, assignee)
            except ApiError as exc:
                allowed = f" Allowed from here: {', '.join(exc.allowed)}." if exc.allowed else ""
                self.notify(f"{exc.message}.{allowed}", title="Move refused", severity="error", timeout=8)
                return
            except ConnectionFailed as exc:
                self.notify(str(exc), title="Not connected", severity="error")
                return
        self.moved(task, on_done)

    def moved(self, task: Task | None, on_done: Callable | None) -> None:
        if not isinstance(task, Task):
            return
        self.notify(f"{task.title} → {task.status}", timeout=3)
        if on_done is not None:
            on_done(task)

    @work(group="task-move", exit_on_error=False)
    async def move_task_dialog(self, task_id: str, title: str, on_done: Callable | None = None,
                               status: str | None = None) -> None:
        """Starts on the status, offering only the moves the state table allows from `status`."""
        moves = allowed_moves(status)
        form = FormScreen(f"Move: {title}" + (f" (now {status})" if status else ""), [
            Field("status", "New status", moves[0], kind="select", options=moves),
            Field("reason", "Reason (holding, closed)", max_len=limits.TASK_REASON),
            Field("assignee", "Reassign to (optional)")], "Move", focus="status")

        async def submit(values: dict):
            try:
                return await self.client.move_task(task_id, values["status"], values["reason"] or None,
                                                   values["assignee"] or None)
            except ApiError as exc:
                if exc.status == 409 and exc.allowed:  # moved meanwhile: offer what the server allows now
                    form.query_one("#field-status", Select).set_options([(Text(s), s) for s in exc.allowed])
                raise
        form.submit = submit
        task = await self.push_screen_wait(form)
        self.moved(task, on_done)


def binding_ids() -> set[str]:
    """Every binding id keys.toml may name: the app's, the panes' and the form's."""
    classes = [CoordApp, FormScreen, PlainTable, ListTree] + [cls for _, _, cls in PANES]
    return {b.id for cls in classes for base in cls.__mro__ for b in base.__dict__.get("BINDINGS", [])
            if isinstance(b, Binding) and b.id}
