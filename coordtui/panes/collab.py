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
from textual.widgets import TextArea
from textual.widgets.text_area import Document, Edit, EditResult

from ..client.notebook import LOCAL_ORIGIN as LOCAL  # the provider sends every non-remote transaction
from ..client.safe_text import neutralise


def byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8"))


def char_index(text: str, offset: int) -> int:
    return len(text.encode("utf-8")[:offset].decode("utf-8", errors="ignore"))


class CollabTextArea(TextArea):
    """Call `bind(text)` once the document is synced; `unbind()` when the page closes."""

    def __init__(self, text: str = "", *, soft_wrap: bool = True, **kwargs: Any) -> None:
        super().__init__(text, soft_wrap=soft_wrap, **kwargs)
        self.shared: Text | None = None
        self.undo_manager: UndoManager | None = None
        self._subscription: Subscription | None = None
        self._applying_remote = False
        self.remote_edits = 0
        self.raw = ""  # the shared text as it is (self.text is what is shown: the same, neutralised)

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
