"""The coordtui App: the connection, the panes, and what they report, routed.

Who does what:
- the Session (session.py) holds what the app knows of the server (client, identity, unread counts, kept
  alerts) and the clock; panes and screens are given it and only read it;
- Live (live.py), held as `self.live`, keeps the counts, alerts, toasts and the undo slot; it asks the app
  for the few things in LiveHost, and the app draws what it decides (tab badges);
- operator screens and actions (ops/) are given an OpsHost (`self.ops`);
- panes never call into the app: they report up with typed messages (Pane.Refreshed, WakePane.Shown, ...)
  that the `@on(...)` handlers below route, and the app reaches them through typed properties (`chat_pane`).
"""
from __future__ import annotations

import asyncio
import time
from collections import deque
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Protocol, TypeVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Static, TabbedContent, TabPane
from textual.worker import Worker

from .alerts import store_path
from .client.api import ApiError, ConnectionFailed, CoordClient
from .client.events import CONNECTED, CONNECTING, DISCONNECTED, REFUSED, EventStream
from .client.models import ServerEvent, WakeItem, counted
from .config import Profile
from .connection import state_look
from .keybar import KeyBar
from .keys import load_keys, unknown_ids
from .live import Live, since_text
from .ops.base import EventWatcher, OpsHost
from .ops.commands import OpsCommands, open_ops
from .panes.base import Pane
from .panes.buzz import BuzzPane
from .panes.catalog import PANES, spec_of
from .panes.chat import ChatPane
from .panes.inbox import InboxPane
from .panes.notebook import NotebookPane
from .panes.swarm import SwarmPane
from .panes.wake import WakePane
from .screens.confirm import ConfirmScreen
from .screens.connect import ConnectScreen
from .screens.form import FormScreen
from .screens.help import HelpScreen, PaneHelp
from .screens.reservations import ReservationsScreen
from .screens.task_detail import TaskDetailScreen
from .session import Session
from .tables import ListTree, PlainTable
from .typeahead import KeysInOrder
from .unread import tab_labels

P = TypeVar("P", bound=Pane[Any])


class BundledServer(Protocol):
    """The server `--serve` runs or attaches to (bundled.Bundled; tests also pass an embedded.EmbeddedServer)."""

    @property
    def data_dir(self) -> Path: ...

    def stop(self) -> None: ...


class Simulation(Protocol):
    """`--demo`'s simulated cast (demo.Demo): run while the app runs, cancelled when it ends."""

    async def run(self) -> None: ...


class CoordApp(KeysInOrder, App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "coord"
    COMMANDS = App.COMMANDS | {OpsCommands}
    # digits switch panes from lists; alt+digit (priority) from anywhere, inputs and editors included
    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(spec.key, f"pane('{spec.id}')", spec.title, show=False, id=f"app.pane.{spec.id}") for spec in PANES),
        *(Binding(f"alt+{spec.key}", f"pane('{spec.id}')", spec.title, show=False, priority=True) for spec in PANES),
        Binding("question_mark", "help", "Help", show=False, id="app.help"), Binding("ctrl+r", "reload", "Refresh", show=False, id="app.reload"),
        Binding("u", "undo", "Undo", show=False, id="app.undo"), Binding("escape", "leave_input", show=False),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True)]  # pinned in the key bar

    conn_state = reactive(CONNECTING)

    def __init__(self, profile: Profile | None, *, bell: bool = False, embedded: BundledServer | None = None,
                 clock: Callable[[], datetime] | None = None, batch_interval: float = 0.06,
                 stream: bool = True, backoff: tuple[float, float] = (0.25, 8.0), notify: bool = False,
                 demo: Simulation | None = None):
        super().__init__()
        self.key_config = load_keys()
        self.session = Session(clock=clock, backoff=backoff,
                               open_marks_read=bool(self.key_config.options["open_marks_read"]))
        self.live = Live(self.session, self, desktop=notify, bell=bell)
        self.ops = OpsHost(self, self.session, self.show_channel)
        self.profile = profile
        self.embedded = embedded
        self.demo = demo
        self.demo_worker: Worker[None] | None = None
        self.batch_interval = batch_interval
        self.use_stream = stream
        self.stream: EventStream | None = None
        self.conn_detail = ""
        self._pending: list[ServerEvent] = []
        self._ever_connected = False
        self._quit_asked = False
        self._switched_to: str | None = None  # the tab _switch_to showed, whose TabActivated is still to come
        self.known_identities: tuple[str, ...] = ()  # as last heard: identity fields complete from them at once
        self.form_drafts: dict[str, dict[str, Any]] = {}  # cancelled forms' typed text, by form (screens/form.py)
        self.events_received = 0
        self.recent_events: deque[ServerEvent] = deque(maxlen=200)
        self.batches = 0
        self.first_wake_painted: float | None = None

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Every toast (widgets' notify() lands here too) is plain text: what toasts say is mostly the server's
        (titles, senders, error messages), and markup in it would be obeyed: `[link=URL]` shows one text and
        opens another. The text is already neutralised for the terminal by the SDK (client/safe_text.py)."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    # what Live asks of the app (live.LiveHost); notify, bell and run_worker are Textual's
    def write_terminal(self, text: str) -> None:
        if self._driver is not None:
            self._driver.write(text)
            self._driver.flush()

    def badges_changed(self) -> None:
        self.render_badges()

    def wake_changed(self, refilter: bool) -> None:
        try:
            wake = self.wake_pane
        except NoMatches:
            return
        if refilter and wake.active:
            wake.refilter()
        elif not wake.active:
            wake.stale = True

    # layout
    def compose(self) -> ComposeResult:
        with Horizontal(id="topbar"):
            yield Static("coord · DEMO" if self.demo else "coord", id="brand", classes="demo" if self.demo else "")
            yield Static("", id="who")
            yield Static("", id="updated")
            yield Static("", id="conn")
        with TabbedContent(id="panes"):
            for spec in PANES:
                with TabPane(f"{spec.key} {spec.title}", id=spec.tab_id):
                    yield spec.cls(self.session, title=spec.title, id=spec.id)
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
        if self.demo is not None:
            self.demo_worker = self.run_worker(self.demo.run(), name="demo", group="demo", exit_on_error=False)

    def on_resize(self) -> None:
        self.render_badges()  # narrower or wider: the tab labels are fitted to the width

    def connect_to(self, profile: Profile | None) -> None:
        if profile is None:
            self.exit()
            return
        self.profile = profile
        self.session.client = CoordClient(profile.url, profile.token)
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
        if self.session.client is not None:
            await self.session.client.aclose()
        self.session.identity, self.session.is_admin, self._ever_connected = None, False, False
        self.conn_state, self.conn_detail = CONNECTING, ""
        for pane in self.panes():
            pane.stale = True
        self.connect_to(profile)

    @work(exclusive=True, group="session", exit_on_error=False)
    async def start_session(self) -> None:
        try:
            who = await self.session.connected_client().verify()
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
        client = self.session.connected_client()
        self.stream = EventStream(client.base_url, client.token, self.on_stream_event, self.on_stream_state,
                                  min_backoff=self.session.backoff[0], max_backoff=self.session.backoff[1])
        client.on_reachable = self.stream.retry_now
        await self.stream.run()

    async def on_unmount(self) -> None:
        if self.demo_worker is not None:  # the cast stops first, while the server it talks to is still there
            self.demo_worker.cancel()
            with suppress(Exception):
                await self.demo_worker.wait()
        if self.session.client is not None:
            await self.session.client.aclose()
        if self.embedded is not None:
            await asyncio.to_thread(self.embedded.stop)  # --serve: the bundled server ends with the app

    # connection state
    def on_stream_state(self, state: str, detail: str) -> None:
        reconnected = state == CONNECTED and self.conn_state != CONNECTED and self._ever_connected
        if state == CONNECTED:
            self._ever_connected = True
            if self.session.identity is None and detail:
                self.session.identity = detail
                self.verify_later()
        self.conn_detail = detail
        self.conn_state = state
        if reconnected:
            self._pending.append(ServerEvent("reconnected", {}))

    def set_identity(self, identity: str, is_admin: bool) -> None:
        self.session.identity, self.session.is_admin = identity, is_admin
        self.learn_identity_names()
        self.session.alerts.attach(store_path(self.server_key(), identity))
        self.live.buzz_seen.attach(store_path(self.server_key(), identity, "buzz-seen"))
        self.render_connection()
        self.live.recount()
        with suppress(NoMatches):
            self.main_screen().refresh_bindings()  # the admins' keys come or go (Pane.check_action)

    async def identity_names(self) -> tuple[str, ...]:
        """The server's identities, for the identity fields of forms to complete from (screens/form.py)."""
        self.known_identities = tuple(user.id for user in await self.session.connected_client().users())
        return self.known_identities

    @work(group="identity-names", exclusive=True, exit_on_error=False)
    async def learn_identity_names(self) -> None:
        """Heard once connected, so that the first form's completion is there as it opens: a name typed ahead and
        taken with `right` in one burst would otherwise meet no completion yet."""
        with suppress(ApiError, ConnectionFailed):
            await self.identity_names()

    def server_key(self) -> str:
        """What names this server across runs: the bundled server's port changes every start, its data dir does not."""
        if self.embedded is not None:
            return f"bundled:{Path(self.embedded.data_dir).resolve()}"
        return self.profile.url if self.profile is not None else ""

    @work(group="session", exit_on_error=False)
    async def verify_later(self) -> None:
        try:
            who = await self.session.connected_client().verify()
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
        try:
            conn, who_label = self.query_one("#conn", Static), self.query_one("#who", Static)
        except NoMatches:  # not composed yet
            return
        text, colour = state_look(self.conn_state)
        conn.update(Text(text, style=f"bold {colour}"))
        who = ""
        if self.session.identity:
            who = f"{self.session.identity}{' (admin)' if self.session.is_admin else ''}"
        if self.profile is not None:
            where = self.profile.name if self.profile.name not in ("command line", "environment") else \
                self.profile.url.split("://", 1)[-1]
            who += f" @ {where}"
        who_label.update(who)

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
        for screen in self.screen_stack:
            if isinstance(screen, EventWatcher):
                screen.handle_events(batch)
        active = self.active_pane
        try:
            chat = self.chat_pane
        except NoMatches:
            return
        self.live.note_events(batch, in_view=active.id if active is not None else None,
                              chat_open=chat.current if chat.active else None, chat_channels=chat.channels)

    # what the panes report
    @on(Pane.Refreshed)
    def pane_refreshed(self, message: Pane.Refreshed) -> None:
        if message.pane.active:
            self.render_updated()

    @on(Pane.UndoOffered)
    def undo_offered(self, message: Pane.UndoOffered) -> None:
        self.live.offer_undo(message.what, message.undo)

    @on(Pane.CountsStale)
    def counts_stale(self, message: Pane.CountsStale) -> None:
        self.live.recount()

    @on(Pane.OpsAsked)
    def ops_asked(self, message: Pane.OpsAsked) -> None:
        open_ops(self.ops, message.name)

    @on(WakePane.Shown)
    def wake_shown(self, message: WakePane.Shown) -> None:
        if message.channels is not None:
            self.session.counts.set_channels(message.channels)
        self.live.wake_seen(message.wake)
        self.live.counts_seen(wake=message.wake)

    @on(WakePane.Painted)
    def wake_painted(self, message: WakePane.Painted) -> None:
        if self.first_wake_painted is None:
            self.first_wake_painted = time.perf_counter()

    @on(WakePane.ItemOpened)
    def wake_item_opened(self, message: WakePane.ItemOpened) -> None:
        self.open_wake_item(message.item)

    @on(WakePane.AlertDismissed)
    def alert_dismissed(self, message: WakePane.AlertDismissed) -> None:
        self.session.alerts.dismiss(message.key)
        self.wake_changed(refilter=True)  # its summary counted the kept alerts with this one

    @on(InboxPane.MailCounted)
    def mail_counted(self, message: InboxPane.MailCounted) -> None:
        self.live.counts_seen(mail=message.unread)

    @on(ChatPane.ChannelsShown)
    def channels_shown(self, message: ChatPane.ChannelsShown) -> None:
        self.live.counts_seen(channels=message.channels)

    @on(ChatPane.ChannelRead)
    def channel_read(self, message: ChatPane.ChannelRead) -> None:
        self.live.counts_seen(channels=self.session.counts.read(message.channel_id))
        self.live.recount()  # a count fetched before this read must not have the last word

    @on(SwarmPane.ReservationsAsked)
    def reservations_asked(self, _message: SwarmPane.ReservationsAsked) -> None:
        self.push_screen(ReservationsScreen(self.session))

    @on(SwarmPane.TaskOpened)
    def task_opened(self, message: SwarmPane.TaskOpened) -> None:
        self.open_task(message.task_id)

    @on(BuzzPane.Viewed)
    def buzz_viewed(self, message: BuzzPane.Viewed) -> None:
        self.live.buzz_viewed(message.newest)

    @on(BuzzPane.RunbookOpened)
    def runbook_opened(self, message: BuzzPane.RunbookOpened) -> None:
        """An alert's runbook is a notebook page: the Notes pane in view with it open."""
        notebook = self.notebook_pane
        self.show_pane(notebook)
        notebook.open_page(message.page_id)

    # panes
    def main_screen(self) -> Screen[Any]:
        """The panes' screen, also while a dialog is on top of it."""
        if not self.screen_stack:  # torn down
            raise NoMatches("no screen")
        return self.screen_stack[0]

    def panes(self) -> list[Pane[Any]]:
        """From the panes' screen: events still reach them while a dialog is open."""
        return list(self.screen_stack[0].query(Pane)) if self.screen_stack else []

    def pane_of(self, cls: type[P]) -> P:
        """The pane of that class (NoMatches before the panes are composed, or once torn down)."""
        return self.main_screen().query_one(cls)

    @property
    def wake_pane(self) -> WakePane:
        return self.pane_of(WakePane)

    @property
    def inbox_pane(self) -> InboxPane:
        return self.pane_of(InboxPane)

    @property
    def chat_pane(self) -> ChatPane:
        return self.pane_of(ChatPane)

    @property
    def notebook_pane(self) -> NotebookPane:
        return self.pane_of(NotebookPane)

    @property
    def active_pane(self) -> Pane[Any] | None:
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

    def show_pane(self, pane: Pane[Any]) -> None:
        self._switch_to(spec_of(pane).tab_id)

    def action_pane(self, pane_id: str) -> None:
        """The digit keys (bindings built from the pane list)."""
        self._switch_to(next(spec for spec in PANES if spec.id == pane_id).tab_id)

    def _switch_to(self, tab_id: str) -> None:
        """The pane comes into view and takes the cursor at once, not when TabbedContent's TabActivated comes
        round: keys typed right after the switch (3 i text) go to the pane's keys, and a late TabActivated would
        move the cursor back to the list from the message box `i` had put it in."""
        tabs = self.query_one("#panes", TabbedContent)
        if tabs.active == tab_id:
            return
        tabs.active = tab_id
        self._switched_to = tab_id
        self._pane_in_view()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if self._switched_to is not None and event.pane.id == self._switched_to:
            self._switched_to = None  # _switch_to did it already
            return
        self._switched_to = None
        self._pane_in_view()  # a click on a tab

    def _pane_in_view(self) -> None:
        pane = self.active_pane
        if pane is not None and self.session.client is not None:
            pane.focus_default()
            self.render_updated()
            self.call_later(self.switched_to, pane)  # once the focus has moved (focus() is queued too)

    def switched_to(self, pane: Pane[Any]) -> None:
        """A pane just came into view: what it showed last is on screen and its keys in the bottom row at once;
        only after that paint is its data refreshed (a big list's refresh would hold the paint back)."""
        self.query_one(KeyBar).show_keys_now(then=pane.activated)

    def render_badges(self) -> None:
        """The tab labels with Live's counts, as wide as the terminal allows."""
        badges = self.live.counts.badges()
        labels = tab_labels([spec.title for spec in PANES], [badges.get(spec.id) for spec in PANES],
                            self.size.width)
        try:
            tabs = self.main_screen().query_one("#panes", TabbedContent)
            for spec, text in zip(PANES, labels):
                tab = tabs.get_tab(spec.tab_id)
                if tab.label_text != text:
                    tab.label = text
        except NoMatches:  # torn down
            return

    def render_updated(self) -> None:
        """The top bar's "updated 12s ago" for the pane in view (what it shows meanwhile), "· refreshing…" while
        it reloads."""
        pane = self.active_pane
        parts = []
        if pane is not None and pane.updated_at is not None:
            parts.append(f"updated {since_text((self.session.now() - pane.updated_at).total_seconds())} ago")
        if pane is not None and pane.busy:
            parts.append("refreshing…")
        text = " · ".join(parts)
        try:
            label = self.main_screen().query_one("#updated", Static)
        except NoMatches:
            return
        if str(label.content) != text:
            label.update(text)

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
        plural = len(unsent) > 1 or unsent[0].startswith("the kept drafts") or not unsent[0].startswith(("1 ", "the "))
        self.push_screen(ConfirmScreen(f"{what[0].upper()}{what[1:]} {'are' if plural else 'is'} not on the server "
                                       f"yet and would be lost. Quit anyway?", "Quit"), answered)

    def unsent_work(self) -> list[str]:
        """What quitting now would lose, in words ("3 notebook edits typed offline", "the text in the open form")."""
        lost = []
        try:
            edits = self.notebook_pane.unsent_edits()
            drafts = self.chat_pane.unsent_drafts()
        except NoMatches:
            edits = drafts = 0
        if edits:
            lost.append(f"{counted(edits, 'notebook edit')} typed offline")
        forms = [screen for screen in self.screen_stack if isinstance(screen, FormScreen)]
        if any(form.typed() for form in forms):
            lost.append("the text in the open form")
        kept = sorted({key.split("\x00", 1)[0] for key in set(self.form_drafts) - {form.draft_key for form in forms}})
        if kept:  # named by their forms' titles: "the kept drafts of “New message” and “New task”"
            titles = [f"“{title if len(title) <= 40 else title[:39] + '…'}”" for title in kept]
            named = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " and " + titles[-1]
            lost.append(f"the kept draft{'s' if len(kept) > 1 else ''} of {named}")
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
        section = PaneHelp(pane.title, pane.KEYS, type(pane)) if pane is not None else None
        self.push_screen(HelpScreen([(spec.key, spec.title) for spec in PANES], section, self.key_config))

    @work(group="undo", exit_on_error=False)
    async def action_undo(self) -> None:
        if await self.live.undo():
            pane = self.active_pane
            if pane is not None:
                pane.request_reload()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for spec in PANES:
            yield SystemCommand(f"Pane: {spec.title}", f"Show the {spec.title} pane (key {spec.key})",
                                lambda pane_id=spec.id: self.action_pane(pane_id))
        yield SystemCommand("Refresh pane", "Reload the active pane from the server (ctrl+r)", self.action_reload)
        yield SystemCommand("Keys", "List the keys (?)", self.action_help)
        yield SystemCommand("Connect…", "Another server URL, token or profile (this one ends)", self.action_connect)

    # cross-pane actions
    def open_wake_item(self, item: WakeItem) -> None:
        if item.source == "chat":
            chat = self.chat_pane
            chat.input_next = True
            self.show_pane(chat)
            chat.open_for_reading(str(item.channel_id or item.id))
        elif item.source in ("message", "message_pending"):
            inbox = self.inbox_pane
            inbox.select_message(item.id)
            self.show_pane(inbox)
            inbox.request_reload()
        elif item.source == "swarm":
            self.open_task(str(item.id))
        elif item.source in ("ask", "ask_result"):
            self.run_worker(self.open_ask(item), group="open-ask", exit_on_error=False)
        else:
            self.notify(f"{item.summary}\n\n{item.action}", title=item.source, timeout=10)

    async def open_ask(self, item: WakeItem) -> None:
        """enter on a question: what it is about (its message or task); on an answer to mine: the outcome,
        which reading marks read (its wake item leaves)."""
        try:
            ask = await self.session.connected_client().get_ask(item.id)
        except (ApiError, ConnectionFailed) as exc:
            self.notify(exc.message if isinstance(exc, ApiError) else str(exc), title="Not opened",
                        severity="error", timeout=6)
            return
        if item.source == "ask_result":
            self.notify(item.summary, title="Answer", timeout=10)
            self.wake_pane.request_reload()
            self.live.recount()
        context = ask.context or {}
        if context.get("taskId"):
            self.open_task(str(context["taskId"]))
        elif context.get("messageId"):
            inbox = self.inbox_pane
            inbox.select_message(context["messageId"])
            self.show_pane(inbox)
            inbox.request_reload()
        elif item.source == "ask":
            about = f" (about alert {context['alertId']})" if context.get("alertId") else ""
            self.notify(f"{ask.question}{about}", title=f"Question from {ask.asker}", timeout=10)

    def open_task(self, task_id: str) -> None:
        self.push_screen(TaskDetailScreen(self.session, task_id))

    def show_channel(self, channel_id: str) -> None:
        """The Chat pane in view with `channel_id` open (a group chat just created: ops/chat.py)."""
        chat = self.chat_pane
        self.show_pane(chat)
        chat.request_reload()
        self.call_later(lambda: chat.open_channel(channel_id))


def binding_ids() -> set[str]:
    """Every binding id keys.toml may name: the app's, the panes' and the form's."""
    classes: list[type[Any]] = [CoordApp, FormScreen, PlainTable, ListTree] + [spec.cls for spec in PANES]
    return {b.id for cls in classes for base in cls.__mro__ for b in base.__dict__.get("BINDINGS", [])
            if isinstance(b, Binding) and b.id}
