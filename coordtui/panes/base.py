"""What every pane shares: a coalesced reload worker, event routing hooks, error display, and the messages
every pane may send up to the app.

A pane never calls into the app. It reads what it needs of the app's state from the Session it is given
(the client, who we are, the clock, the counts), and reports what the app should know or do as a typed
message (`Pane.Refreshed`, `Pane.UndoOffered`, ...; the panes' own in their classes) that the app handles
with `@on(...)`. Forms and dialogs it opens itself, through Textual's own `push_screen_wait`."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Awaitable, Callable, ClassVar, Generic, Literal, TypeVar

from rich.markup import escape
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget
from textual.widgets import ContentSwitcher, DataTable, Input, Static, TabPane, Tree

from ..client.api import ApiError, ConnectionFailed, CoordClient
from ..client.models import ServerEvent
from ..session import Session
from ..tables import row_matches

# The operator screens a pane's key opens (ops/commands.py OPENERS has one opener for each).
OpsName = Literal["projects", "templates", "webhooks", "tokens", "invites", "users", "group", "asks", "ask", "connect",
                  "invite", "archived_chats"]
# Those only an admin may use: a pane neither shows nor binds their keys for anyone else. (Connecting an agent and
# inviting a teammate stay: a non-admin is told what to ask an admin for.)
ADMIN_OPS: frozenset[str] = frozenset({"tokens", "invites", "users"})

Data = TypeVar("Data")  # what a pane's load() fetches and its show() renders
Result = TypeVar("Result")


class Pane(Widget, Generic[Data], can_focus=False):
    """A live view. Subclasses implement `load()` (SDK calls) and `show(data)` (widgets).

    `request_reload()` never stacks requests: while one load runs, further requests set a flag and exactly one
    more load follows. Events arrive in batches through `handle_events`.
    """

    EVENT_TYPES: ClassVar[frozenset[str]] = frozenset()
    KEYS: ClassVar[list[tuple[str, str]]] = []
    POLL_SECONDS: ClassVar[float | None] = None  # for data no event announces: reloaded this often while in view
    FRESH_FOR: ClassVar[float] = 10.0  # a pane returning to view older than this reloads at once
    SERVER_FILTER: ClassVar[bool] = False  # `/` asks the server (on enter) instead of filtering what is shown
    # One line for when the pane shows nothing (no filter set): what would appear here, and the key that makes
    # something appear. Shown under the pane's summary line (or on top) while shows_nothing() holds; none when left empty.
    EMPTY_HINT: ClassVar[str] = ""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter", id="pane.filter")]  # j/k etc.: the lists' own (tables.py)

    @dataclass
    class Refreshed(Message):
        """The pane showed fresh data (the top bar's "updated 0s ago" when it is in view)."""
        pane: Pane[Any]

    @dataclass
    class UndoOffered(Message):
        """An action that `undo` reverses was done: `u` runs `undo` (one slot: the latest offer wins)."""
        what: str
        undo: Callable[[], Awaitable[object]]

    @dataclass
    class CountsStale(Message):
        """Something the pane did changed the unread counts: the tab badges are refetched."""

    @dataclass
    class OpsAsked(Message):
        """A key of the pane opens an operator screen or form."""
        name: OpsName

    def __init__(self, session: Session, *, title: str, id: str) -> None:
        super().__init__(id=id)
        self.session = session
        self.title = title  # the pane's one name (panes/catalog.py): its tab, its help section, its error toasts
        self._loading = False
        self._again = False
        self.stale = True
        self.loads = 0
        self.last_error: str | None = None
        self.unsupported = False
        self.updated_at: datetime | None = None
        self.filter_text = ""
        self.filtered_as: str | None = None  # the filter the rows shown were chosen by (None: not yet)
        self._refilter_due = False
        self._last_data: Data | None = None

    @property
    def client(self) -> CoordClient:
        """The SDK client: loads and key actions run only once there is one (request_reload waits for it)."""
        return self.session.connected_client()

    @property
    def active(self) -> bool:
        """Whether this pane's tab is the one in view (on the panes' screen, also while a dialog covers it)."""
        tab = self.parent
        switcher = tab.parent if tab is not None else None
        return isinstance(tab, TabPane) and isinstance(switcher, ContentSwitcher) and switcher.current == tab.id

    def request_reload(self) -> None:
        if self.session.client is None:
            return
        if not self.active:
            self.stale = True
            return
        self.stale = False
        if self._loading:
            self._again = True
            return
        self._loading = True
        self.run_worker(self._reload(), group=f"load-{self.id}", exit_on_error=False)

    async def _reload(self) -> None:
        try:
            while True:
                self._again = False
                try:
                    data = await self.load()
                except (ApiError, ConnectionFailed) as exc:
                    self.show_error(exc)
                else:
                    self.last_error = None
                    self.unsupported = False
                    self.loads += 1
                    self.render_data(data)
                if not self._again:
                    break
        finally:
            self._loading = False

    @property
    def busy(self) -> bool:
        return self._loading

    @property
    def awaits_first_data(self) -> bool:
        """Fetching the first data it will show, or about to (in view, connected, its load not yet asked for):
        keys typed ahead for it wait for its rows (typeahead.py)."""
        return self.loads == 0 and (self._loading or (self.stale and self.session.client is not None))

    # Every pane defines these two: fetch through the SDK, then render what was fetched.
    async def load(self) -> Data:
        raise TypeError(f"{type(self).__name__} must define load()")

    def show(self, data: Data) -> None:
        raise TypeError(f"{type(self).__name__} must define show()")

    def render_data(self, data: Data) -> None:
        """Shows fresh data and remembers it, so a filter can re-show it without asking the server."""
        self._last_data = data
        self.updated_at = self.session.now()
        self.show(data)
        self.filtered_as = self.filter_text
        self.show_empty_hint()
        self.post_message(self.Refreshed(self))

    # --- the empty state --------------------------------------------------------------

    def shows_nothing(self) -> bool:
        """Whether the pane shows nothing: none of its lists has a row (a tree: a branch)."""
        lists = list(self.query(DataTable).results(DataTable))
        trees = list(self.query(Tree).results(Tree))
        return bool(lists or trees) and all(table.row_count == 0 for table in lists) and \
            all(not tree.root.children for tree in trees)

    def show_empty_hint(self) -> None:
        """EMPTY_HINT under the summary line while the pane is empty and no filter narrows it; hidden otherwise."""
        if not self.EMPTY_HINT:
            return
        empty = not self.filter_text and self.shows_nothing()
        found = self.query(".pane-empty")
        if found:
            found.first(Static).display = empty
        elif empty:
            hint = Static(Text(self.EMPTY_HINT), id=f"{self.id}-empty", classes="pane-empty")
            # under the pane's own summary line; a summary inside a column (Chat, Notes) is too narrow: on top
            summaries = [s for s in self.query(".pane-summary") if s.parent is self]
            if summaries:
                self.mount(hint, after=summaries[0])
            else:
                self.mount(hint, before=0)

    def on_mount(self) -> None:
        if self.POLL_SECONDS:
            self.set_interval(self.POLL_SECONDS, self._poll)

    def _poll(self) -> None:
        if self.active and not self.busy and not self.unsupported:
            self.request_reload()

    # --- `/` filter, focus ------------------------------------------------------------

    def matches(self, *texts: object) -> bool:
        """Whether a row passes the filter: every word of it appears somewhere in the row (any case)."""
        return self.SERVER_FILTER or row_matches(self.filter_text, *texts)

    def filter_input(self) -> Input:
        found = self.query(f"#{self.id}-filter")
        if found:
            return found.first(Input)
        box = Input(placeholder="filter (escape clears)" if not self.SERVER_FILTER else "search (enter), escape clears",
                    id=f"{self.id}-filter", classes="pane-filter")
        box.cursor_blink = False
        self.mount(box, before=0)
        return box

    def action_filter(self) -> None:
        box = self.filter_input()
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        """Each key in the filter box: the box shows it at once, and keys typed faster than the rows are filtered
        are applied together (the filter runs after what is queued already), the last text winning."""
        if event.input.id == f"{self.id}-filter" and not self.SERVER_FILTER:
            self.filter_text = event.value.strip()
            if not self._refilter_due:
                self._refilter_due = True
                self.call_later(self._refilter_typed)

    def _refilter_typed(self) -> None:
        self._refilter_due = False
        if self.filtered_as != self.filter_text:
            self.refilter()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != f"{self.id}-filter":
            return
        self.filter_text = event.value.strip()
        if not self.filter_text:
            event.input.display = False
        self.focus_list()
        self.refilter()

    def on_key(self, event: events.Key) -> None:
        boxes = self.query(f"#{self.id}-filter")
        if event.key != "escape" or not boxes:
            return
        box = boxes.first(Input)
        if box.has_focus or self.filter_text:
            box.value = ""
            box.display = False
            self.filter_text = ""
            self.focus_list()
            self.refilter()
            event.stop()

    def refilter(self) -> None:
        if self.SERVER_FILTER:
            self.request_reload()
        elif self._last_data is not None:
            self.apply_filter(self._last_data)
            self.filtered_as = self.filter_text
            self.show_empty_hint()

    def apply_filter(self, data: Data) -> None:
        """The rows of `data` that pass the filter shown again; a pane with long lists filters them in place."""
        self.show(data)

    def focus_default(self) -> None:
        """Where the cursor goes when the pane comes into view."""
        self.focus_list()

    def focus_list(self) -> None:
        """The pane's first visible list gets the keys (escape from an input lands here)."""
        lists = [w for w in self.query("DataTable, Tree") if w.display]
        if lists:
            lists[0].focus()

    def show_error(self, exc: Exception) -> None:
        """Says why the pane is empty: in its summary line, and once as a toast."""
        self.unsupported = isinstance(exc, ApiError) and exc.unsupported
        if isinstance(exc, ApiError) and exc.unsupported:
            text = f"This server does not support this view ({exc.message})."
        else:
            text = str(exc)
        for summary in self.query(".pane-summary").results(Static):
            summary.update(f"[red]{escape(text)}[/red]")
            break
        if text != self.last_error:
            self.notify(text, title=self.title, severity="error", timeout=4)
        self.last_error = text

    def handle_events(self, events: list[ServerEvent]) -> None:
        """A batch of events; the default reloads once if any concerns this pane."""
        if any(self.concerns(e) for e in events):
            self.request_reload()

    def concerns(self, event: ServerEvent) -> bool:
        if event.type == "inbox_check":
            # our own list/search calls announce themselves; only an ack (maybe from another client) changes data
            return event.type in self.EVENT_TYPES and event.data.get("action") == "ack"
        return event.type in self.EVENT_TYPES

    def activated(self) -> None:
        """Back in view: stale or old data reloads at once (what was shown stays until the answer comes)."""
        age = (self.session.now() - self.updated_at).total_seconds() if self.updated_at else None
        if self.stale or age is None or age > self.FRESH_FOR:
            self.request_reload()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The admins' keys (ADMIN_OPS) are neither shown nor bound for anyone else."""
        return not (action == "ops" and parameters and parameters[0] in ADMIN_OPS and not self.session.is_admin)

    def action_ops(self, name: OpsName) -> None:
        self.post_message(self.OpsAsked(name))

    def offer_undo(self, what: str, undo: Callable[[], Awaitable[object]]) -> None:
        self.post_message(self.UndoOffered(what, undo))

    async def act(self, call: Awaitable[Result], success: str | None = None) -> Result | Literal[True] | None:
        """Runs one SDK call for a key action; refusals become a toast, never an exception. What the call
        answered (True when it answers nothing), or None when it was refused or the server was unreachable."""
        try:
            result = await call
        except ApiError as exc:
            text = exc.message + (f" (allowed: {', '.join(exc.allowed)})" if exc.allowed else "")
            self.notify(text, title="Refused", severity="error", timeout=6)
            return None
        except ConnectionFailed as exc:
            self.notify(str(exc), title="Not connected", severity="error", timeout=6)
            return None
        if success:
            self.notify(success, timeout=3)
        return result if result is not None else True
