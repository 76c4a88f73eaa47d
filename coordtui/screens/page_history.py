"""A notebook page's history: its versions (who edited, when, how much), a coloured diff of any version against
the page as it is now or against the version before it, restore with a confirmation (an ordinary edit that live
editors converge on; the text it replaces is kept as a version too), and a checkpoint with a label."""
from __future__ import annotations

import difflib
from typing import Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ..client.api import ApiError, ConnectionFailed
from ..client.models import PageVersion, age_text, counted
from ..keybar import KeyBar
from ..session import Session
from ..tables import PlainTable, cursor_key
from .confirm import ConfirmScreen
from .focus import focus_first
from .form import Field, FormScreen

REASONS = {"created": "created", "time": "edited", "idle": "last editor left", "checkpoint": "checkpoint",
           "before_restore": "before a restore", "restore": "restored"}
DIFF_STYLE = {"+": "green", "-": "red", "@": "cyan"}


def diff_lines(old: str, new: str, old_name: str, new_name: str, context: int = 2) -> Text:
    """A unified diff, added lines green and removed ones red; 'No differences.' when the texts agree."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, n=context,
                                      lineterm=""))
    if not lines:
        return Text("No differences.", style="dim")
    shown = Text()
    for line in lines:
        style = "bold" if line.startswith(("---", "+++")) else DIFF_STYLE.get(line[:1], "")
        shown.append(line + "\n", style=style)
    return shown


def describe(version: PageVersion) -> str:
    reason = REASONS.get(version.reason, version.reason)
    return f"{reason}: {version.label}" if version.label else reason


class PageHistoryScreen(Screen[None]):
    """`current_text()` is the page as the editor has it now (the live document when open)."""
    AUTO_FOCUS = "#history-table"  # see screens/focus.py

    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("p", "toggle_base", "Diff base"),
                Binding("r", "restore", "Restore"), Binding("c", "checkpoint", "Checkpoint"),
                Binding("ctrl+r", "reload", "Refresh")]

    def __init__(self, session: Session, page_id: str, title: str, current_text: Callable[[], str | None]) -> None:
        super().__init__(classes="ops-screen")
        self.session = session
        self.page_id = page_id
        self.page_title = title
        self.current_text = current_text
        self.versions: dict[str, PageVersion] = {}
        self.texts: dict[int, str] = {}  # version id -> its text, fetched once
        self.against_previous = False
        self.loads = 0

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble((f"History: {self.page_title}", "bold"),
                                   ("  p diff against now/previous · r restore · c checkpoint · esc back", "dim")),
                     id="history-title")
        yield Static("Loading…", id="history-summary", classes="pane-summary")
        table = PlainTable(id="history-table", cursor_type="row")
        table.add_columns("Version", "When", "What", "Editors", "Size")
        yield table
        with VerticalScroll(id="history-diff-box"):
            yield Static("", id="history-diff")
        yield KeyBar()

    def on_mount(self) -> None:
        focus_first(self)
        self.reload()

    def action_reload(self) -> None:
        self.reload()

    @work(exclusive=True, group="history-load", exit_on_error=False)
    async def reload(self) -> None:
        summary = self.query_one("#history-summary", Static)
        try:
            versions = await self.session.connected_client().page_versions(self.page_id, limit=200)
        except (ApiError, ConnectionFailed) as exc:
            summary.update(Text(exc.message if isinstance(exc, ApiError) else str(exc), style="red"))
            return
        table = self.query_one("#history-table", DataTable)
        selected = cursor_key(table)
        table.clear()
        self.versions = {str(v.id): v for v in versions}
        now = self.session.now()
        for version in versions:
            table.add_row(str(version.id), age_text(version.created_at, now) or "now", Text(describe(version)),
                          ", ".join(version.editors) or (version.created_by or ""), f"{version.size:,}",
                          key=str(version.id))
        if selected in self.versions:
            table.move_cursor(row=table.get_row_index(selected))
        summary.update(Text(f"{counted(len(versions), 'version')} · newest first"))
        self.loads += 1
        self.show_diff()

    def selected(self) -> PageVersion | None:
        return self.versions.get(cursor_key(self.query_one("#history-table", DataTable)) or "")

    def previous_of(self, version: PageVersion) -> PageVersion | None:
        older = [v for v in self.versions.values() if v.id < version.id]
        return max(older, key=lambda v: v.id) if older else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_diff()

    def action_toggle_base(self) -> None:
        self.against_previous = not self.against_previous
        self.show_diff()

    @work(exclusive=True, group="history-diff", exit_on_error=False)
    async def show_diff(self) -> None:
        version = self.selected()
        box = self.query_one("#history-diff", Static)
        if version is None:
            box.update("")
            return
        try:
            old_text = await self.text_of(version)
            if self.against_previous:
                base = self.previous_of(version)
                before, after = (await self.text_of(base) if base else ""), old_text
                names = (f"version {base.id}" if base else "(nothing)", f"version {version.id}")
            else:
                now = self.current_text()
                if now is None:
                    page = await self.session.connected_client().page(self.page_id)
                    now = page.content or ""
                before, after = old_text, now
                names = (f"version {version.id}", "now")
        except (ApiError, ConnectionFailed) as exc:
            box.update(Text(exc.message if isinstance(exc, ApiError) else str(exc), style="red"))
            return
        if self.selected() is version:
            box.update(diff_lines(before, after, *names))

    async def text_of(self, version: PageVersion) -> str:
        if version.id not in self.texts:
            full = await self.session.connected_client().page_version(self.page_id, version.id)
            self.texts[version.id] = full.content or ""
        return self.texts[version.id]

    @work(group="history-action", exit_on_error=False)
    async def action_restore(self) -> None:
        version = self.selected()
        if version is None:
            return
        question = (f"Restore version {version.id} ({describe(version)}, {version.size:,} characters)? Live "
                    "editors see the change; the text it replaces is kept as a version.")
        if not await self.app.push_screen_wait(ConfirmScreen(question, "Restore")):
            return
        try:
            await self.session.connected_client().restore_page_version(self.page_id, version.id)
        except (ApiError, ConnectionFailed) as exc:
            self.notify(exc.message if isinstance(exc, ApiError) else str(exc), title="Not restored",
                        severity="error", timeout=6)
            return
        self.notify(f"Version {version.id} restored", timeout=4)
        self.reload()

    @work(group="history-action", exit_on_error=False)
    async def action_checkpoint(self) -> None:
        client = self.session.connected_client()
        made = await self.app.push_screen_wait(FormScreen("Checkpoint: keep the page as it is now", [
            Field("label", "Label (e.g. before the failover drill)", max_len=200, wire="label")], "Keep",
            submit=lambda values: client.checkpoint_page(self.page_id, values["label"] or None)))
        if isinstance(made, PageVersion):
            self.notify(f"Kept as version {made.id}", timeout=4)
            self.reload()
