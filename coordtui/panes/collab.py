"""A TextArea bound to a pycrdt `Text`: local edits go into the CRDT, remote deltas come back without moving
your cursor, and undo/redo only touch your own edits (pycrdt UndoManager tracking the local origin).

pycrdt positions are UTF-8 byte offsets; the TextArea speaks code points. Conversions happen here only.

What the TextArea shows is the shared text neutralised for the terminal (client/safe_text.py): a control
character someone else typed shows as its placeholder and never reaches the screen, while the shared document
keeps it unchanged (nobody's text is rewritten by being viewed). Each placeholder is one code point, so a
position in the shown text is the same position in the shared one; byte offsets are always counted in the
shared text (`self.raw`, its mirror), never in the shown one, whose placeholders are longer in UTF-8.
"""
from __future__ import annotations

from typing import Any

from pycrdt import Subscription, Text, TextEvent, UndoManager
from rich.color import Color, ColorParseError
from rich.segment import Segment
from rich.style import Style
from textual.message import Message
from textual.strip import Strip
from textual.widgets import TextArea
from textual.widgets.text_area import Document, Edit, EditResult

from ..client.notebook import LOCAL_ORIGIN as LOCAL  # the provider sends every non-remote transaction
from ..client.notebook import RemoteCursor
from ..client.safe_text import neutralise


def byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8"))


EDITOR_COLOURS = ("#e5a50a", "#3584e4", "#2ec27e", "#c061cb", "#ff7800", "#26a269", "#e01b24", "#62a0ea")


def colour_for(name: str) -> str:
    """An editor's colour when it names none: the same for the same name in every coordtui."""
    return EDITOR_COLOURS[sum(name.encode("utf-8")) % len(EDITOR_COLOURS)]


def cursor_colour(cursor: RemoteCursor) -> str:
    """Their own colour when it is one a terminal can show, else one chosen from their name."""
    if cursor.color:
        try:
            Color.parse(cursor.color)
            return cursor.color
        except ColorParseError:
            pass
    return colour_for(cursor.name)


def restyle(strip: Strip, start: int, end: int, style: Style) -> Strip:
    """`strip` with cells start..end drawn in `style` on top of their own."""
    start, end = max(0, start), min(end, strip.cell_length)
    if start >= end:
        return strip
    left, middle, right = strip.divide([start, end, strip.cell_length])
    marked = Strip(list(Segment.apply_style(middle, post_style=style)), middle.cell_length)
    return Strip.join([left, marked, right])


def char_index(text: str, offset: int) -> int:
    return len(text.encode("utf-8")[:offset].decode("utf-8", errors="ignore"))


class CollabTextArea(TextArea):
    """Call `bind(text)` once the document is synced; `unbind()` when the page closes."""

    class RemoteEdited(Message):
        """Someone else's edit reached the text (a view rendered from it follows)."""

    def __init__(self, text: str = "", *, soft_wrap: bool = True, **kwargs: Any) -> None:
        super().__init__(text, soft_wrap=soft_wrap, **kwargs)
        self.shared: Text | None = None
        self.undo_manager: UndoManager | None = None
        self._subscription: Subscription | None = None
        self._applying_remote = False
        self.remote_edits = 0
        self.raw = ""  # the shared text as it is (self.text is what is shown: the same, neutralised)
        self.remote_cursors: list[RemoteCursor] = []  # the other editors' carets and selections (awareness)

    @property
    def plain_document(self) -> Document:
        """The text as TextArea keeps it: a Document (no syntax language is set), which converts between
        indexes and locations (DocumentBase, its declared type, does not)."""
        document = self.document
        assert isinstance(document, Document)
        return document

    def bind(self, shared: Text) -> None:
        self.unbind()
        self.shared = shared
        self.raw = str(shared)
        self._applying_remote = True
        try:
            with self.prevent(TextArea.Changed):
                self.load_text(self.raw)
        finally:
            self._applying_remote = False
        self.undo_manager = UndoManager(scopes=[shared], capture_timeout_millis=400)
        self.undo_manager.include_origin(LOCAL)
        self._subscription = shared.observe(self._on_shared_change)

    def unbind(self) -> None:
        if self.shared is not None and self._subscription is not None:
            try:
                self.shared.unobserve(self._subscription)
            except Exception:
                pass  # the document may already be gone with its session
        self.shared = None
        self.undo_manager = None
        self._subscription = None

    def show_cursors(self, cursors: list[RemoteCursor]) -> None:
        self.remote_cursors = list(cursors)
        self.refresh()

    def screen_offset(self, index: int) -> tuple[int, int]:
        """Where a position of the text is drawn: (x in the widget, y in the wrapped document)."""
        index = max(0, min(index, len(self.text)))
        offset = self.wrapped_document.location_to_offset(self.plain_document.get_location_from_index(index))
        return offset.x + self.gutter_width - self.scroll_offset.x, offset.y

    def render_line(self, y: int) -> Strip:
        """The line as TextArea draws it, with the other editors' selections underlined and their carets as a
        block, each in the editor's colour."""
        strip = super().render_line(y)
        row = self.scroll_offset.y + y
        for cursor in self.remote_cursors:
            colour = cursor_colour(cursor)
            if cursor.selection is not None:
                (x0, y0), (x1, y1) = (self.screen_offset(i) for i in cursor.selection)
                if y0 <= row <= y1:
                    start = x0 if row == y0 else self.gutter_width
                    end = x1 if row == y1 else strip.cell_length
                    strip = restyle(strip, start, end, Style(underline=True, color=colour))
            if cursor.head is not None:
                x, caret_row = self.screen_offset(cursor.head)
                if caret_row == row:
                    strip = restyle(strip, x, x + 1, Style(bgcolor=colour, color="black"))
        return strip

    def load_text(self, text: str) -> None:
        """Shows `text` neutralised (the stored text shown before the live document arrives, too)."""
        super().load_text(neutralise(text))

    # local -> CRDT
    def edit(self, edit: Edit) -> EditResult:
        """The shared document gets the text as typed or pasted; the screen gets it neutralised."""
        shown = Edit(neutralise(edit.text), edit.from_location, edit.to_location, edit.maintain_selection_offset)
        if self._applying_remote or self.shared is None:
            return super().edit(shown)
        before = self.raw
        top, bottom = sorted((edit.from_location, edit.to_location))
        start = self.plain_document.get_index_from_location(top)
        end = self.plain_document.get_index_from_location(bottom)
        result = super().edit(shown)
        start_b, end_b = byte_offset(before, start), byte_offset(before, end)
        doc = self.shared.doc
        with doc.transaction(origin=LOCAL):
            if end_b > start_b:
                del self.shared[start_b:end_b]
            if edit.text:
                self.shared.insert(start_b, edit.text)
        self.raw = before[:start] + edit.text + before[end:]
        return result

    # CRDT -> screen (remote peers, merged PATCHes, and our own undo/redo)
    def _on_shared_change(self, event: TextEvent) -> None:
        if event.transaction.origin == LOCAL:
            return
        delta: list[dict[str, Any]] = event.delta  # type: ignore[attr-defined]  # pycrdt lists it in __slots__ only
        self._apply_delta(delta)

    def _apply_delta(self, delta: list[dict[str, Any]]) -> None:
        self._applying_remote = True
        try:
            with self.prevent(TextArea.Changed):
                current = self.raw  # the shared text before this delta: its byte offsets are the delta's
                position = 0  # bytes
                for op in delta:
                    if "retain" in op:
                        position += op["retain"]
                    elif "insert" in op:
                        inserted = op["insert"] if isinstance(op["insert"], str) else ""
                        index = char_index(current, position)
                        self.insert(inserted, self.plain_document.get_location_from_index(index),
                                    maintain_selection_offset=True)
                        current = current[:index] + inserted + current[index:]
                        position += len(inserted.encode("utf-8"))
                    elif "delete" in op:
                        start = char_index(current, position)
                        end = char_index(current, position + op["delete"])
                        self.delete(self.plain_document.get_location_from_index(start),
                                    self.plain_document.get_location_from_index(end),
                                    maintain_selection_offset=True)
                        current = current[:start] + current[end:]
                self.raw = current
            self.remote_edits += 1
        finally:
            self._applying_remote = False
        self.post_message(self.RemoteEdited())

    def undo(self) -> None:
        if self.undo_manager is None:
            return super().undo()
        if not self.read_only and self.undo_manager.can_undo():
            self.undo_manager.undo()

    def redo(self) -> None:
        if self.undo_manager is None:
            return super().redo()
        if not self.read_only and self.undo_manager.can_redo():
            self.undo_manager.redo()
