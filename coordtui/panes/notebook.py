"""Notebook: the page list and a collaborative editor bound to the CRDT session of the open page."""
from __future__ import annotations

from typing import Any, Awaitable

from rich.markup import escape
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from ..client import limits
from ..client.api import ApiError, ConnectionFailed
from ..client.models import Page, age_text
from ..client.notebook import NotebookSession
from ..screens.form import Field, FormScreen
from ..session import Session
from .base import Pane
from .collab import CollabTextArea
from ..tables import PlainTable


class NotebookPane(Pane[list[Page]]):
    EVENT_TYPES = frozenset({"notebook_page_updated", "resync", "reconnected"})
    KEYS = [("enter", "open the page for editing"), ("n", "new page"), ("ctrl+l", "lock / unlock (owner)"),
            ("ctrl+z / ctrl+y", "undo / redo your own edits"), ("escape", "back to the page list")]
    BINDINGS = [Binding("n", "new_page", "New page", id="notebook.new"),
                Binding("ctrl+l", "toggle_lock", "Lock", id="notebook.lock")]

    def __init__(self, session: Session, *, title: str, id: str) -> None:
        super().__init__(session, title=title, id=id)
        self.pages: dict[str, Page] = {}
        self.page_id: str | None = None
        self.page_session: NotebookSession | None = None  # the open page's live document
        self.viewers: list[str] = []
        self.readonly_reason: str | None = None
        self.parked: set[NotebookSession] = set()  # pages left with offline edits, still reconnecting to send them

    def compose(self) -> ComposeResult:
        with Horizontal(classes="split"):
            table = PlainTable(id="notebook-pages", cursor_type="row", classes="list narrow")
            table.add_columns("Page", "Updated")
            yield table
            with Vertical(classes="detail"):
                yield Static("No page open.", id="notebook-status", classes="pane-summary")
                # tab indents: moving focus out would hand the next keystrokes (digits) to pane switching
                editor = CollabTextArea("", id="notebook-editor", read_only=True, tab_behavior="indent")
                editor.cursor_blink = False
                yield editor

    async def load(self) -> list[Page]:
        return await self.client.pages()

    def show(self, pages: list[Page]) -> None:
        table = self.query_one("#notebook-pages", DataTable)
        table.clear()
        self.pages = {p.id: p for p in pages}
        now = self.session.now()
        for page in pages:
            if not self.matches(page.title, *(page.tags or [])):
                continue
            mark = "🔒 " if page.locked else ""
            table.add_row(mark + page.title, age_text(page.updated_at, now), key=page.id)
        if self.page_id in self.pages and self.page_id in table.rows:
            table.move_cursor(row=table.get_row_index(self.page_id))
        self.render_status()

    def render_status(self) -> None:
        page = self.pages.get(self.page_id or "")
        if page is None and self.page_id is None:
            text = "No page open. Select one and press enter."
        else:
            title = page.title if page else self.page_id
            viewers = ", ".join(self.viewers) or "-"
            text = f"[b]{escape(title or '')}[/b] · {self.editing_state()} · viewers: {escape(viewers)}"
        self.query_one("#notebook-status", Static).update(text)

    def editing_state(self) -> str:
        session = self.page_session
        if self.readonly_reason:
            return f"[red]read-only ({escape(self.readonly_reason)})[/red]"
        if session is None or not session.synced:
            return "[yellow]connecting… (stored text, read-only)[/yellow]"
        pending = session.pending_edits
        if not session.online:
            edits = f"{pending} edit{'' if pending == 1 else 's'} pending" if pending else "no edits pending"
            return f"[yellow]offline — {edits}; keep typing[/yellow]"
        return f"[green]editing · sending {pending}…[/green]" if pending else "[green]editing · saved[/green]"

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.open_page(event.row_key.value)

    @work(exclusive=True, group="notebook-open", exit_on_error=False)
    async def open_page(self, page_id: str) -> None:
        await self.close_session()
        self.page_id = page_id
        self.readonly_reason = None
        editor = self.query_one("#notebook-editor", CollabTextArea)
        editor.read_only = True
        self.render_status()
        self.show_stored_text(page_id)
        session = NotebookSession(self.client.base_url, self.client.token, page_id, backoff=self.session.backoff)
        self.page_session = session
        session.on_viewers.append(lambda viewers: self.apply_session_state())
        session.on_readonly.append(lambda readonly, reason: self.apply_session_state())
        session.on_state.append(lambda: self.apply_session_state())
        session.on_closed.append(lambda code, message: self.session_closed(session, message))
        try:
            await session.open()
        except Exception as exc:  # refused: 4004 not visible, 4001 token
            self.page_session = None
            self.readonly_reason = str(exc) or "cannot open the page"
            self.notify(self.readonly_reason, title="Notebook", severity="error")
            self.render_status()
            return
        self.apply_session_state()
        if session.synced:
            editor.focus()

    @work(group="notebook-stored", exit_on_error=False)
    async def show_stored_text(self, page_id: str) -> None:
        """Until the live document arrives the editor shows the stored text, read-only."""
        try:
            page = await self.client.page(page_id)
        except (ApiError, ConnectionFailed):
            return  # the live document, when it comes, is what counts
        editor = self.query_one("#notebook-editor", CollabTextArea)
        if self.page_id == page_id and editor.shared is None:
            editor.load_text(page.content or "")

    def session_closed(self, session: NotebookSession, message: str | None) -> None:
        if session is self.page_session:
            self.readonly_reason = f"disconnected{': ' + message if message else ''}"
            self.query_one("#notebook-editor", CollabTextArea).read_only = True
            self.render_status()

    def apply_session_state(self) -> None:
        session = self.page_session
        if session is None:
            return
        editor = self.query_one("#notebook-editor", CollabTextArea)
        if session.synced and editor.shared is not session.text:
            editor.bind(session.text)  # the first sync, or a resync that replaced the document
        self.viewers = list(session.viewers) if session.online else []
        self.readonly_reason = session.readonly_reason or ("read-only" if session.readonly else None)
        editor.read_only = bool(self.readonly_reason) or not session.synced
        self.render_status()

    async def close_session(self) -> None:
        editor = self.query_one("#notebook-editor", CollabTextArea)
        editor.unbind()
        if self.page_session is not None:
            session, self.page_session = self.page_session, None
            if not session.online and session.pending_edits and not session.closed:
                self.park(session)
            else:
                await session.close()  # online, it sends what is queued first

    def park(self, session: NotebookSession) -> None:
        """Leaving a page with edits typed offline: closing its session would drop them, so it stays open in
        the background, reconnecting as before, and closes once they are sent."""
        self.parked.add(session)
        session.on_state.append(lambda: self.close_when_sent(session))
        session.on_closed.append(lambda code, message: self.parked.discard(session))
        edits = session.pending_edits
        self.notify(f"{edits} edit{'' if edits == 1 else 's'} on the page you left will be sent when the server "
                    f"is back", title="Notebook", timeout=5)

    def close_when_sent(self, session: NotebookSession) -> None:
        if session in self.parked and session.online and not session.pending_edits:
            self.parked.discard(session)
            self.run_worker(session.close(), group="notebook-parked", exit_on_error=False)

    def unsent_edits(self) -> int:
        """Edits typed offline, on the open page and pages left, that quitting now would drop."""
        return sum(s.pending_edits for s in [self.page_session, *self.parked] if s is not None and not s.online)

    async def on_unmount(self) -> None:
        for session in [self.page_session, *self.parked]:
            if session is not None:
                await session.close()

    def focus_default(self) -> None:
        """Back on Notes with a page open, typing goes on where it stopped: the editor, not the list."""
        editor = self.query_one("#notebook-editor", CollabTextArea)
        if self.page_id is not None and editor.shared is not None:
            editor.focus()
        else:
            super().focus_default()

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and self.query_one("#notebook-editor").has_focus:
            self.query_one("#notebook-pages", DataTable).focus()
            event.stop()

    @work(group="notebook-action", exit_on_error=False)
    async def action_new_page(self) -> None:
        def create(values: dict[str, Any]) -> Awaitable[Page]:
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
