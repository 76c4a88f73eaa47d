"""Directory: shared links; add, edit, delete, search. Who added a link carries the agent mark when it is an agent."""
from __future__ import annotations

from typing import Literal

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from ..agentmark import named
from ..client import limits
from ..client.models import DirectoryEntry, counted
from ..screens.confirm import ConfirmScreen
from ..screens.form import Field, FormScreen
from ..screens.page_links import PageLink, linked, use_links
from ..session import Session
from .base import Pane
from ..tables import PlainTable, cursor_key


class DirectoryPane(Pane[list[DirectoryEntry]]):
    EMPTY_HINT = "Shared links (dashboards, docs, repositories) appear here. a adds one."
    EVENT_TYPES = frozenset({"resync", "reconnected"})
    POLL_SECONDS = 15.0  # no event announces link changes
    SERVER_FILTER = True
    KEYS = [("enter / o", "open the link"), ("y", "copy its address"), ("a", "add a link"),
            ("e", "edit the link (its creator or an admin)"), ("d", "delete the link (asks first)"),
            ("/", "search (enter; escape clears)")]
    BINDINGS = [Binding("a", "add", "Add", id="directory.add"), Binding("e", "edit", "Edit", id="directory.edit"),
                Binding("d", "delete", "Delete", id="directory.delete"),
                Binding("o", "link('open')", "Open", id="directory.open"),
                Binding("y", "link('copy')", "Copy", show=False, id="directory.copy")]

    def __init__(self, session: Session, *, title: str, id: str) -> None:
        super().__init__(session, title=title, id=id)
        self.entries: dict[str, DirectoryEntry] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="directory-summary", classes="pane-summary")
        table = PlainTable(id="directory-table", cursor_type="row")
        table.add_columns("Title", "URL", "By", "Description")
        yield table

    async def load(self) -> list[DirectoryEntry]:
        return await self.client.directory(self.filter_text or None)

    def show(self, entries: list[DirectoryEntry]) -> None:
        self.entries = {str(e.id): e for e in entries}
        # changed in place: the cursor stays on its link (one just edited, or any across the 15 s polls)
        self.query_one("#directory-table", PlainTable).show_rows([
            (str(entry.id), [entry.title, linked(entry.url),
                             named(entry.created_by, entry.created_by_is_agent) if entry.created_by else "",
                             entry.description or ""]) for entry in entries])
        label = f"search “{self.filter_text}”: " if self.filter_text else ""
        self.query_one("#directory-summary", Static).update(f"{label}{counted(len(entries), 'link')}")

    def selected(self) -> DirectoryEntry | None:
        key = cursor_key(self.query_one("#directory-table", DataTable))
        return self.entries.get(key) if key is not None else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_link("open")

    def action_link(self, how: Literal["open", "copy"]) -> None:
        """enter / o open the highlighted link, y copies its address (OSC 52)."""
        entry = self.selected()
        if entry is None:
            self.notify("Select a link first", severity="warning", timeout=3)
            return
        use_links(self.app, [PageLink(entry.title, entry.url)], how, "this entry")

    @work(group="directory-action", exit_on_error=False)
    async def action_add(self) -> None:
        if await self.app.push_screen_wait(FormScreen("Add a link", link_fields(), "Add", submit=lambda v: (
                self.client.add_directory(v["title"], v["url"], v["description"] or None)))):
            self.notify("Link added", timeout=3)
            self.request_reload()

    @work(group="directory-action", exit_on_error=False)
    async def action_edit(self) -> None:
        """e: the selected link's fields in the add form's fields, filled in (focus on the title, selected: typing
        replaces it); ctrl+s saves them. The server decides who may (its creator or an admin): its refusal shows in
        the form."""
        entry = self.selected()
        if entry is None:
            self.notify("Select a link first", severity="warning", timeout=3)
            return
        saved = await self.app.push_screen_wait(FormScreen("Edit link", link_fields(entry), "Save", focus="title",
                                                           submit=lambda v: self.client.update_directory(
                                                               entry.id, title=v["title"], url=v["url"],
                                                               description=v["description"] or None)))
        if saved:
            self.notify(f"Saved {saved.title}", timeout=3)
            self.request_reload()

    @work(group="directory-action", exit_on_error=False)
    async def action_delete(self) -> None:
        entry = self.selected()
        if entry is None or not await self.app.push_screen_wait(ConfirmScreen(f"Delete the link “{entry.title}”?",
                                                                              "Delete")):
            return
        if await self.act(self.client.delete_directory(entry.id), f"Deleted {entry.title}"):
            self.request_reload()


def link_fields(entry: DirectoryEntry | None = None) -> list[Field]:
    """A link's form fields (add and edit): empty, or those of `entry`."""
    return [Field("title", "Title", entry.title if entry else "", required=True, max_len=limits.LINK_TITLE),
            Field("url", "URL", entry.url if entry else "", required=True, max_len=limits.LINK_URL),
            Field("description", "Description", (entry.description or "") if entry else "",
                  max_len=limits.LINK_DESCRIPTION)]
