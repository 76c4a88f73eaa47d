"""Notebook: the page list and a collaborative editor bound to the CRDT session of the open page."""
from __future__ import annotations

from typing import Any, Awaitable, Literal

from rich.markup import escape
from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.actions import SkipAction
from textual.widgets import DataTable, Input, MarkdownViewer, Static, TextArea
from textual.widgets.markdown import MarkdownBlock
from textual.widgets.text_area import Selection

from ..client import limits
from ..client.api import ApiError, ConnectionFailed
from ..client.models import Page, age_text
from ..client.notebook import NotebookSession, RemoteCursor
from ..screens.form import Field, FormScreen
from ..screens.page_history import PageHistoryScreen
from ..screens.page_links import text_links, use_links
from ..session import Session
from .base import Pane
from .collab import CollabTextArea, colour_for, cursor_colour
from ..tables import PlainTable, cursor_key


def find_all(text: str, query: str) -> list[int]:
    """Where `query` starts in `text`, case-insensitively (no overlaps); none for an empty query."""
    if not query:
        return []
    haystack, needle = text.casefold(), query.casefold()
    if len(haystack) != len(text):  # casefolding changed lengths (ß → ss): positions would drift
        haystack, needle = text.lower(), query.lower()
    starts, at = [], haystack.find(needle)
    while at >= 0 and len(haystack) == len(text):
        starts.append(at)
        at = haystack.find(needle, at + max(len(needle), 1))
    return starts


class NotebookPane(Pane[list[Page]]):
    EMPTY_HINT = "Shared pages (runbooks, notes), edited live, appear here. n creates one."
    EVENT_TYPES = frozenset({"notebook_page_updated", "resync", "reconnected"})
    KEYS = [("enter", "open the page for editing"), ("n", "new page"), ("ctrl+l", "lock / unlock (owner)"),
            ("ctrl+z / ctrl+y", "undo / redo your own edits"), ("escape", "back to the page list"),
            ("h", "the page's history: diff, restore, checkpoint (in the list)"),
            ("ctrl+t", "read the page rendered (Markdown, contents) / back to editing"),
            ("ctrl+f", "find in the page: enter or down next, up previous, escape closes"),
            ("o / y", "rendered view: the page's links, to open or copy"),
            ("ctrl+g", "follow the next editor's caret (again: the one after; after the last: stop)")]
    BINDINGS = [Binding("n", "new_page", "New page", id="notebook.new"),
                Binding("h", "history", "History", id="notebook.history"),
                Binding("ctrl+t", "toggle_view", "Read/Edit", id="notebook.view"),
                Binding("ctrl+f", "find", "Find", show=False, id="notebook.find"),
                Binding("ctrl+g", "follow", "Follow", show=False, id="notebook.follow"),
                Binding("o", "links('open')", "Open link", show=False, id="notebook.links_open"),
                Binding("y", "links('copy')", "Copy link", show=False, id="notebook.links_copy"),
                Binding("ctrl+l", "toggle_lock", "Lock", id="notebook.lock")]

    def __init__(self, session: Session, *, title: str, id: str) -> None:
        super().__init__(session, title=title, id=id)
        self.pages: dict[str, Page] = {}
        self.page_id: str | None = None
        self.page_session: NotebookSession | None = None  # the open page's live document
        self.viewers: list[str] = []
        self.readonly_reason: str | None = None
        self.parked: set[NotebookSession] = set()  # pages left with offline edits, still reconnecting to send them
        self.found: int | None = None  # where the current find match starts
        self.following: int | None = None  # the awareness client id of the editor whose caret the view follows
        self.find_from: int | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(classes="split"):
            table = PlainTable(id="notebook-pages", cursor_type="row", classes="list narrow")
            table.add_columns("Page", "Updated")
            table.give_way = ("Page",)  # a long title is cut, not the header beside it ("Updat")
            yield table
            with Vertical(classes="detail"):
                yield Static("No page open.", id="notebook-status", classes="pane-summary")
                # tab indents: moving focus out would hand the next keystrokes (digits) to pane switching
                editor = CollabTextArea("", id="notebook-editor", read_only=True, tab_behavior="indent")
                editor.cursor_blink = False
                yield editor
                view = MarkdownViewer("", id="notebook-view", show_table_of_contents=True, open_links=False)
                view.display = False
                view.can_focus = True  # the keys scroll it, and the pane's keys (find, links, back) reach the pane
                yield view
                find = Input(placeholder="find in page (enter/down next · up previous · escape closes)",
                             id="notebook-find", classes="pane-filter")
                find.display = False
                yield find

    async def load(self) -> list[Page]:
        return await self.client.pages()

    def show(self, pages: list[Page]) -> None:
        table = self.query_one("#notebook-pages", PlainTable)
        table.clear()
        self.pages = {p.id: p for p in pages}
        now = self.session.now()
        for page in pages:
            if not self.matches(page.title, *(page.tags or [])):
                continue
            mark = "🔒 " if page.locked else ""
            table.add_row(mark + page.title, age_text(page.updated_at, now), key=page.id)
        table.fit_columns()
        if self.page_id in self.pages and self.page_id in table.rows:
            table.move_cursor(row=table.get_row_index(self.page_id))
        self.render_status()

    def render_status(self) -> None:
        page = self.pages.get(self.page_id or "")
        if page is None and self.page_id is None:
            text = "No page open. Select one and press enter."
        else:
            title = page.title if page else self.page_id
            text = f"[b]{escape(title or '')}[/b] · {self.editing_state()} · viewers: {self.viewers_text()}"
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
        session.on_cursors.append(lambda cursors: self.cursors_changed(session))
        session.set_user(self.session.identity or "coordtui", colour_for(self.session.identity or ""))
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

    # --- who is where --------------------------------------------------------------------------------

    def cursors_changed(self, session: NotebookSession) -> None:
        if session is not self.page_session:
            return
        cursors = list(session.cursors.values())
        self.query_one("#notebook-editor", CollabTextArea).show_cursors(cursors)
        if self.following is not None and self.following not in {c.client_id for c in cursors}:
            self.following = None  # they left
        self.show_followed()
        self.render_status()

    def on_text_area_selection_changed(self, event: TextArea.SelectionChanged) -> None:
        """My caret and selection, for the other editors to see (code points, as the awareness state carries)."""
        editor = event.text_area
        session = self.page_session
        if not isinstance(editor, CollabTextArea) or session is None or not session.synced or editor.shared is None:
            return
        document = editor.plain_document
        session.set_cursor(document.get_index_from_location(event.selection.start),
                           document.get_index_from_location(event.selection.end))

    def action_follow(self) -> None:
        """Follow the next editor's caret (the view scrolls to it as it moves); after the last, stop following."""
        session = self.page_session
        others = sorted(session.cursors.values(), key=lambda c: c.name) if session is not None else []
        if not others:
            self.following = None
            self.notify("Nobody else is on this page", timeout=3)
            self.render_status()
            return
        ids = [c.client_id for c in others]
        position = ids.index(self.following) + 1 if self.following in ids else 0
        self.following = ids[position] if position < len(ids) else None
        followed = next((c for c in others if c.client_id == self.following), None)
        self.notify(f"Following {followed.name}" if followed else "Not following anyone", timeout=3)
        self.show_followed()
        self.render_status()

    def show_followed(self) -> None:
        session = self.page_session
        cursor = session.cursors.get(self.following) if session is not None and self.following is not None else None
        if cursor is None or cursor.head is None:
            return
        editor = self.query_one("#notebook-editor", CollabTextArea)
        _x, row = editor.screen_offset(cursor.head)
        if not editor.scroll_offset.y <= row < editor.scroll_offset.y + editor.scrollable_content_region.height:
            editor.scroll_to(y=max(0, row - editor.scrollable_content_region.height // 2), animate=False)

    def viewers_text(self) -> str:
        """Who is on the page, and where the editors' carets are: 'alice, bob line 3 (following)' (each editor
        in their colour; an editor that is no viewer by name, e.g. a JavaScript client, is listed too)."""
        session = self.page_session
        cursors = sorted(session.cursors.values(), key=lambda c: c.name) if session is not None else []
        editor = self.query_one("#notebook-editor", CollabTextArea)

        def placed(cursor: RemoteCursor) -> str:
            where = ""
            if cursor.head is not None:
                row, _col = editor.plain_document.get_location_from_index(min(cursor.head, len(editor.text)))
                where = f" line {row + 1}"
            mark = " (following)" if cursor.client_id == self.following else ""
            return f"[{cursor_colour(cursor)}]{escape(cursor.name)}[/]{where}{mark}"
        by_name = {c.name: c for c in cursors}
        parts = [placed(by_name.pop(name)) if name in by_name else escape(name) for name in self.viewers]
        parts += [placed(cursor) for cursor in by_name.values()]
        return ", ".join(parts) or "-"

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
        if event.key == "escape" and self.query_one("#notebook-find", Input).has_focus:
            self.close_find()
            event.stop()
        elif event.key in ("up", "down") and self.query_one("#notebook-find", Input).has_focus:
            self.find_next(-1 if event.key == "up" else 1)
            event.stop()
        elif event.key == "escape" and (self.query_one("#notebook-editor").has_focus
                                        or self.query_one("#notebook-view").has_focus_within):
            self.query_one("#notebook-pages", DataTable).focus()
            event.stop()

    # --- reading: the rendered view, find, links ----------------------------------------------------

    @property
    def reading(self) -> bool:
        return bool(self.query_one("#notebook-view", MarkdownViewer).display)

    def page_text(self) -> str:
        """The page as shown now (the live document's text, neutralised like the editor shows it)."""
        return self.query_one("#notebook-editor", CollabTextArea).text

    def action_toggle_view(self) -> None:
        """Between editing and reading the page rendered as Markdown (headings, lists, code, tables, links)."""
        if self.page_id is None:
            self.notify("Open a page first", severity="warning", timeout=3)
            return
        view = self.query_one("#notebook-view", MarkdownViewer)
        editor = self.query_one("#notebook-editor", CollabTextArea)
        reading = not view.display
        view.display, editor.display = reading, not reading
        if reading:
            view.document.update(self.page_text())
            view.focus()
        else:
            editor.focus()
        self.render_status()

    def on_collab_text_area_remote_edited(self, _message: CollabTextArea.RemoteEdited) -> None:
        self.refresh_view()

    def refresh_view(self) -> None:
        """The rendered view follows the live text while it is shown."""
        if self.reading:
            self.query_one("#notebook-view", MarkdownViewer).document.update(self.page_text())

    def action_find(self) -> None:
        if self.page_id is None:
            self.notify("Open a page first", severity="warning", timeout=3)
            return
        box = self.query_one("#notebook-find", Input)
        box.display = True
        box.focus()

    def close_find(self) -> None:
        box = self.query_one("#notebook-find", Input)
        box.display = False
        (self.query_one("#notebook-view") if self.reading else self.query_one("#notebook-editor")).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "notebook-find":
            event.stop()
            self.find_from = None
            self.find_next(1)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "notebook-find":
            event.stop()
            self.find_next(1)

    def find_next(self, step: int) -> None:
        """The next (step 1) or previous (-1) match of the find box's text, case-insensitive, wrapping round:
        selected in the editor, or its block scrolled into view in the rendered view."""
        query = self.query_one("#notebook-find", Input).value
        text = self.page_text()
        starts = find_all(text, query)
        status = self.query_one("#notebook-status", Static)
        if not starts:
            self.found = None
            self.render_status()
            if query:
                status.update(Text(f"“{query}” not found", style="yellow"))
            return
        current = self.found if self.found is not None and self.find_from is not None else None
        if current is None:
            index = 0 if step > 0 else len(starts) - 1
        else:
            position = starts.index(current) if current in starts else -1
            index = (position + step) % len(starts)
        self.found = self.find_from = starts[index]
        self.show_match(text, starts[index], len(query))
        status.update(Text(f"match {index + 1} of {len(starts)} for “{query}”"))

    def show_match(self, text: str, start: int, length: int) -> None:
        if self.reading:
            line = text.count("\n", 0, start)
            blocks = [b for b in self.query(MarkdownBlock) if b.source_range and b.source_range[0] <= line < max(
                b.source_range[1], b.source_range[0] + 1)]
            for block in self.query(MarkdownBlock):
                block.remove_class("found")
            if blocks:
                block = blocks[-1]  # the innermost
                block.add_class("found")
                block.scroll_visible(animate=False)
            return
        editor = self.query_one("#notebook-editor", CollabTextArea)
        document = editor.plain_document
        editor.selection = Selection(document.get_location_from_index(start),
                                     document.get_location_from_index(start + length))
        editor.scroll_cursor_visible()

    def action_links(self, how: Literal["open", "copy"]) -> None:
        """o / y in the rendered view: the page's link opened / copied (a chooser when several: Markdown links,
        then bare addresses); elsewhere the key is not ours (in the editor it is typed)."""
        if not self.reading or self.query_one("#notebook-find", Input).has_focus:
            raise SkipAction()
        use_links(self.app, text_links(self.page_text()), how, "this page")

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

    def action_history(self) -> None:
        """The history of the highlighted page (the open one when the list has no cursor)."""
        page_id = cursor_key(self.query_one("#notebook-pages", DataTable)) or self.page_id
        page = self.pages.get(page_id or "")
        if page is None:
            self.notify("Select a page first", severity="warning", timeout=3)
            return
        self.app.push_screen(PageHistoryScreen(self.session, page.id, page.title, lambda: self.live_text(page.id)))

    def live_text(self, page_id: str) -> str | None:
        """The open page's text as the live document has it (None: not open here, or not synced yet)."""
        session = self.page_session
        if self.page_id == page_id and session is not None and session.synced:
            return session.value
        return None

    @work(group="notebook-action", exit_on_error=False)
    async def action_toggle_lock(self) -> None:
        page = self.pages.get(self.page_id or "")
        if page is None:
            return
        updated = await self.act(self.client.update_page(page.id, locked=not page.locked),
                                 "Unlocked" if page.locked else "Locked")
        if updated:
            self.request_reload()
