"""What every operator screen shares: a table loaded through the SDK, forms that send themselves,
confirmations, and a dialog that shows a secret or URL once, selectable and copyable.

Operator screens and actions are given an OpsHost: the app as Textual knows it (to push screens, toast,
copy), the session (client, identity, clock), and how to show a chat channel. They never call into CoordApp."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Awaitable, Callable, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from rich.markup import escape
from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Input, Label, Static, TextArea

from ..client.api import ApiError, ConnectionFailed, CoordClient
from ..client.models import ServerEvent
from ..connection import state_look
from ..screens.focus import focus_first
from ..screens.form import Field, FormScreen, Submit
from ..keybar import KeyBar
from ..session import Session
from ..tables import PlainTable, cursor_key, row_matches


@dataclass(frozen=True)
class OpsHost:
    """What operator screens and actions are given by the app."""
    app: App[Any]  # Textual's: push_screen, notify, copy_to_clipboard, run_worker
    session: Session
    show_channel: Callable[[str], None]  # brings the Chat pane into view with this channel open

    @property
    def client(self) -> CoordClient:
        return self.session.connected_client()


@runtime_checkable
class EventWatcher(Protocol):
    """A screen that follows the event stream while it is open (the app hands it every batch the panes get)."""

    def handle_events(self, events: list[ServerEvent]) -> None: ...


# A command palette entry: its title, a line of help (or none), and what choosing it runs.
Command = tuple[str, str | None, Callable[[], object]]


def blank_none(value: str) -> str | None:
    """Form text to a wire value: empty means null (the API clears or defaults it)."""
    return None if value == "" else value


def number_or_text(value: str) -> int | float | str | None:
    """An hour or count as typed: a number when it is one, else the text, for the server to refuse by name."""
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value


def identity_list(value: str) -> list[str]:
    return [part.strip() for part in value.replace(" ", ",").split(",") if part.strip()]


def refresh_ops(app: App[Any]) -> None:
    """Reload the list that is showing (lists under a dialog reload when they show again)."""
    if isinstance(app.screen, OpsScreen):
        app.screen.reload()


def run_form(host: OpsHost, title: str, fields: list[Field], label: str, submit: Submit,
             done: Callable[[Any], str | None], after: Callable[[Any], None] | None = None,
             form: Callable[..., FormScreen] = FormScreen) -> None:
    """Opens a form that sends itself (a refusal keeps the text); on success: a toast, lists reloaded, `after`."""
    app = host.app

    def finished(result: Any) -> None:
        if result is None:
            return
        text = done(result)
        if text:
            app.notify(text, timeout=5)
        refresh_ops(app)
        if after is not None:
            after(result)
    app.push_screen(form(title, fields, label, submit=submit), finished)


def confirm(host: OpsHost, question: str, label: str, action: Callable[[], Awaitable[Any]], done: str,
            after: Callable[[Any], None] | None = None) -> None:
    """A yes/no dialog whose yes sends the request; a refusal stays visible in the dialog."""
    run_form(host, question, [], label, lambda _values: action(), lambda _r: done, after)


class SecretValue(TextArea):
    """A value the server issued, shown whole (wrapped: an onboarding URL or an MCP configuration is wider than any
    dialog), to select and copy, never to edit."""

    def __init__(self, value: str, **kwargs: Any) -> None:
        super().__init__(value, read_only=True, soft_wrap=True, show_line_numbers=False, **kwargs)

    @property
    def value(self) -> str:
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self.load_text(text)


class SecretScreen(ModalScreen[None]):
    """Shows values the server gives once (a new token, an ingest or onboarding URL) in read-only inputs the
    user can select, with a copy button each (OSC 52 through App.copy_to_clipboard)."""

    BINDINGS = [Binding("escape", "close", "Close"), Binding("c", "copy(0)", "Copy")]
    AUTO_FOCUS = "#copy-0"  # enter or c copies; tab reaches the value itself to select part of it (screens/focus.py)

    def __init__(self, title: str, note: str, values: list[tuple[str, str]], once: bool = False):
        super().__init__(classes="form-screen")
        self.secret_title, self.note, self.values = title, note, values
        self.once = once  # the server never shows it again: closing before a copy asks a second time
        self.copied = False
        self.warned = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="form"):  # scrolls when the terminal is shorter than the values
            yield Label(f"[b]{escape(self.secret_title)}[/b]  [dim]c copy · esc close[/dim]", id="form-title")
            if self.note:
                yield Label(escape(self.note), classes="secret-note")
            yield from self.compose_status()
            for index, (label, value) in enumerate(self.values):
                yield Label(label, classes="field-label")
                with Horizontal(classes="secret-row"):
                    yield SecretValue(value, id=f"secret-{index}", classes="secret-value", compact=True)
                    yield Button("Copy", id=f"copy-{index}", compact=True)
            yield Label("", id="secret-warning")
            with Horizontal(id="form-buttons"):
                yield Button("Close", id="close", variant="primary", compact=True)

    def compose_status(self) -> ComposeResult:
        """A line under the note, near the top so it is in view however short the terminal: none here."""
        return iter(())

    def on_mount(self) -> None:
        focus_first(self)

    def action_copy(self, index: int) -> None:
        label, value = self.values[index]
        self.app.copy_to_clipboard(value)
        self.copied = True
        self.notify(f"{label} copied to the clipboard", timeout=3)

    def action_close(self) -> None:
        if self.once and not self.copied and not self.warned:
            self.warned = True
            self.query_one("#secret-warning", Label).update(
                "[b red]Not copied, and it is not shown again.[/] c copies · esc again closes anyway")
            return
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "close":
            self.action_close()
        elif (event.button.id or "").startswith("copy-"):
            self.action_copy(int((event.button.id or "").split("-", 1)[1]))


class Listed(Protocol):
    """What an operator screen lists: anything with an id (the row's key)."""

    @property
    def id(self) -> object: ...


Item = TypeVar("Item", bound=Listed)


class OpsScreen(Screen[None], Generic[Item]):
    """A full-screen list of one kind of operator object: `fetch()` loads it, `row()` renders one item."""

    TITLE_TEXT: ClassVar[str] = ""
    COLUMNS: ClassVar[tuple[str, ...]] = ()
    HINT: ClassVar[str] = ""
    GIVE_WAY: ClassVar[tuple[str, ...]] = ()  # columns that narrow first when the rows do not fit (tables.py)
    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("ctrl+r", "reload", "Refresh"),
                Binding("slash", "filter", "Filter")]
    AUTO_FOCUS = "#ops-table"  # see screens/focus.py

    def __init__(self, host: OpsHost) -> None:
        super().__init__(classes="ops-screen")
        self.host = host
        self.items: dict[str, Item] = {}
        self.loads = 0
        self.filter_text = ""

    @property
    def client(self) -> CoordClient:
        return self.host.client

    def compose(self) -> ComposeResult:
        with Horizontal(id="ops-top"):
            yield Static(f"[b]{escape(self.TITLE_TEXT)}[/b]  [dim]{escape(self.HINT)} · esc back[/dim]",
                         id="ops-title")
            yield Static("", id="ops-conn")
        yield Static("Loading…", id="ops-summary", classes="pane-summary")
        box = Input(placeholder="filter (escape clears)", id="ops-filter", classes="pane-filter")
        box.display, box.cursor_blink = False, False
        yield box
        table = PlainTable(id="ops-table", cursor_type="row")
        table.give_way = self.GIVE_WAY
        table.add_columns(*self.COLUMNS)
        yield table
        yield Static("", id="ops-detail")
        yield KeyBar()

    def on_mount(self) -> None:
        focus_first(self)
        if hasattr(self.app, "conn_state"):  # the app's top bar is covered: say here whether the server is there
            self.watch(self.app, "conn_state", self.show_connection)
        self.reload()

    def show_connection(self, state: str) -> None:
        text, colour = state_look(state)
        # none while the app closes in the moment the screen opens: its children go before its Mount is handled
        for label in self.query("#ops-conn").results(Static):
            label.update(f"[b {colour}]{escape(text)}[/]")

    def action_reload(self) -> None:
        self.reload()

    def on_screen_resume(self) -> None:
        """Back from a form or dialog: show what it changed (a table filled while covered keeps stale widths)."""
        if self.loads:
            self.reload()

    @work(exclusive=True, group="ops-load", exit_on_error=False)
    async def reload(self) -> None:
        summary = self.query_one("#ops-summary", Static)
        try:
            items = await self.fetch()
        except (ApiError, ConnectionFailed) as exc:
            text = str(exc) if isinstance(exc, ConnectionFailed) else f"Refused: {exc.message} (HTTP {exc.status})"
            if isinstance(exc, ApiError) and exc.unsupported:
                text = f"This server does not support {self.TITLE_TEXT.lower()} ({exc.message})."
            summary.update(f"[red]{escape(text)}[/red]")
            return
        self.items = {str(item.id): item for item in items}
        self.fill()
        summary.update(Text(self.summary(items)))
        self.loads += 1
        self.describe(self.selected())

    def fill(self) -> None:
        """The rows that pass the `/` filter, the cursor staying on its item when it is still listed."""
        table = self.query_one("#ops-table", PlainTable)
        selected = self.selected()
        table.clear(columns=True)  # columns again: their widths follow the new rows (an archived date appears)
        table.add_columns(*self.COLUMNS)
        for key, item in self.items.items():
            cells = self.row(item)
            if row_matches(self.filter_text, *cells):
                table.add_row(*cells, key=key)
        if selected is not None and str(selected.id) in table.rows:
            table.move_cursor(row=table.get_row_index(str(selected.id)))
        self.call_after_refresh(table.fit_columns)  # once the new rows are measured

    def action_filter(self) -> None:
        box = self.query_one("#ops-filter", Input)
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "ops-filter":
            self.filter_text = event.value.strip()
            self.fill()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "ops-filter":
            event.input.display = bool(self.filter_text)
            self.query_one("#ops-table", DataTable).focus()

    def on_key(self, event: events.Key) -> None:
        """Escape in the filter (or with one set) clears it; otherwise it goes back."""
        box = self.query_one("#ops-filter", Input)
        if event.key == "escape" and (box.has_focus or self.filter_text):
            box.value, box.display, self.filter_text = "", False, ""
            self.fill()
            self.query_one("#ops-table", DataTable).focus()
            event.stop()

    async def fetch(self) -> list[Item]:
        raise TypeError(f"{type(self).__name__} must define fetch()")

    def row(self, item: Item) -> tuple[str | Text, ...]:
        raise TypeError(f"{type(self).__name__} must define row()")

    def summary(self, items: list[Item]) -> str:
        return f"{len(items)} {self.TITLE_TEXT.lower()}"

    def detail(self, item: Item) -> str:
        return ""

    def describe(self, item: Item | None) -> None:
        self.query_one("#ops-detail", Static).update(Text(self.detail(item) if item is not None else ""))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value if event.row_key is not None else None
        self.describe(self.items.get(key) if key is not None else None)

    def selected(self) -> Item | None:
        key = cursor_key(self.query_one("#ops-table", DataTable))
        return self.items.get(key) if key is not None else None

    def need(self) -> Item | None:
        item = self.selected()
        if item is None:
            self.notify("Select a row first", severity="warning", timeout=3)
        return item

    def select(self, key: object) -> None:
        table = self.query_one("#ops-table", DataTable)
        if str(key) in table.rows:  # gone meanwhile (deleted elsewhere): the cursor stays where it is
            table.move_cursor(row=table.get_row_index(str(key)))


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else ""
