"""Notebook: the page list and a collaborative editor bound to the CRDT session of the open page."""
from __future__ import annotations

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from ..client import limits
from ..client.models import Page, age_text
from ..client.notebook import NotebookSession
from ..screens.form import Field, FormScreen
from .base import Pane
from .collab import CollabTextArea


class NotebookPane(Pane):
    TITLE = "Notebook"
    EVENT_TYPES = frozenset({"notebook_page_updated", "resync", "reconnected"})
    KEYS = [("enter", "open the page for editing"), ("n", "new page"), ("ctrl+l", "lock / unlock (owner)"),
            ("ctrl+z / ctrl+y", "undo / redo your own edits"), ("escape", "back to the page list")]
    BINDINGS = [Binding("n", "new_page", "New page"), Binding("ctrl+l", "toggle_lock", "Lock")]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.pages: dict[str, Page] = {}
        self.page_id: str | None = None
        self.session = None
        self.viewers: list[str] = []
        self.readonly_reason: str | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(classes="split"):
            table = DataTable(id="notebook-pages", cursor_type="row", classes="list narrow")
            table.add_columns("Page", "Updated")
            yield table
            with Vertical(classes="detail"):
                yield Static("No page open.", id="notebook-status", classes="pane-summary")
                editor = CollabTextArea("", id="notebook-editor", read_only=True)
                editor.cursor_blink = False
                yield editor

    async def load(self) -> list[Page]:
        return await self.client.pages()

    def show(self, pages: list[Page]) -> None:
        table = self.query_one("#notebook-pages", DataTable)
        table.clear()
        self.pages = {p.id: p for p in pages}
        now = self.coord.now()
        for page in pages:
            mark = "🔒 " if page.locked else ""
            table.add_row(mark + page.title, age_text(page.updated_at, now), key=page.id)
        if self.page_id in self.pages:
            table.move_cursor(row=table.get_row_index(self.page_id))
        self.render_status()

    def render_status(self) -> None:
        page = self.pages.get(self.page_id or "")
        if page is None and self.page_id is None:
            text = "No page open. Select one and press enter."
        else:
            title = page.title if page else self.page_id
            state = f"[red]read-only ({escape(self.readonly_reason)})[/red]" if self.readonly_reason else \
                "[green]editing[/green]"
            viewers = ", ".join(self.viewers) or "-"
            text = f"[b]{escape(title or '')}[/b] · {state} · viewers: {escape(viewers)}"
        self.query_one("#notebook-status", Static).update(text)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.open_page(event.row_key.value)

    @work(exclusive=True, group="notebook-open", exit_on_error=False)
    async def open_page(self, page_id: str) -> None:
        await self.close_session()
        self.page_id = page_id
        editor = self.query_one("#notebook-editor", CollabTextArea)
        session = NotebookSession(self.client.base_url, self.client.token, page_id)
        try:
            await session.connect()
        except Exception as exc:  # refused (4004 not visible, 4001 token) or unreachable
            self.notify(str(exc) or "cannot open the page", title="Notebook", severity="error")
            return
        self.session = session
        session.on_viewers.append(lambda viewers: self.apply_session_state())
        session.on_readonly.append(lambda readonly, reason: self.apply_session_state())
        session.on_closed.append(lambda code, message: self.session_closed(session, message))
        editor.bind(session.text)
        self.apply_session_state()
        editor.focus()

    def session_closed(self, session, message: str | None) -> None:
        if session is self.session:
            self.readonly_reason = f"disconnected{': ' + message if message else ''}"
            self.query_one("#notebook-editor", CollabTextArea).read_only = True
            self.render_status()

    def apply_session_state(self) -> None:
        session = self.session
        if session is None:
            return
        self.viewers = list(getattr(session, "viewers", []) or [])
        self.readonly_reason = getattr(session, "readonly_reason", None) or (
            "read-only" if getattr(session, "readonly", False) else None)
        self.query_one("#notebook-editor", CollabTextArea).read_only = bool(self.readonly_reason)
        self.render_status()

    async def close_session(self) -> None:
        editor = self.query_one("#notebook-editor", CollabTextArea)
        editor.unbind()
        if self.session is not None:
            session, self.session = self.session, None
            await session.close()

    async def on_unmount(self) -> None:
        if self.session is not None:
            await self.session.close()

    def on_key(self, event) -> None:
        if event.key == "escape" and self.query_one("#notebook-editor").has_focus:
            self.query_one("#notebook-pages", DataTable).focus()
            event.stop()

    @work(group="notebook-action", exit_on_error=False)
    async def action_new_page(self) -> None:
        def create(values: dict):
            tags = [t.strip() for t in values["tags"].split(",") if t.strip()] or None
            return self.client.create_page(values["title"], "", tags)
        page = await self.app.push_screen_wait(FormScreen("New page", [
            Field("title", "Title", required=True, max_len=limits.PAGE_TITLE),
            Field("tags", "Tags (comma separated)")], "Create", submit=create))
        if isinstance(page, Page):
            self.notify("Page created", timeout=3)
            self.page_id = page.id
            self.request_reload()
            self.open_page(page.id)

    @work(group="notebook-action", exit_on_error=False)
    async def action_toggle_lock(self) -> None:
        page = self.pages.get(self.page_id or "")
        if page is None:
            return
        updated = await self.act(self.client.update_page(page.id, locked=not page.locked),
                                 "Unlocked" if page.locked else "Locked")
        if updated:
            self.request_reload()
