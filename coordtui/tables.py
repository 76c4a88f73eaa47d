"""The list widgets every pane and operator screen uses (one list behaviour: j/k and the arrows move, Home/End
go to the first/last row, PageUp/PageDown a page; `/` filters, bound by the pane or screen), and small
DataTable helpers."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable, Tree
from textual.widgets.data_table import CellDoesNotExist, CellType, ColumnKey, RowKey


def plain(cell: Any) -> Any:
    """A str cell as plain Text: DataTable reads a str cell as markup, and server text must never be markup
    (`[link=https://elsewhere]shown[/link]` would be a hyperlink showing one text and opening another)."""
    return Text(cell) if isinstance(cell, str) else cell


# the keys every list adds to Textual's (arrows, PageUp/PageDown); ids for keys.toml
LIST_KEYS = [Binding("j", "cursor_down", "Down", show=False, id="list.down"),
             Binding("k", "cursor_up", "Up", show=False, id="list.up")]


class PlainTable(DataTable):
    """A DataTable whose str cells are shown as written, never interpreted as markup. Home/End go to the
    first/last row (DataTable's scroll sideways)."""

    BINDINGS = LIST_KEYS + [Binding("home", "scroll_top", "First", show=False, id="list.first"),
                            Binding("end", "scroll_bottom", "Last", show=False, id="list.last")]

    def add_row(self, *cells: CellType, height: int | None = 1, key: str | None = None,
                label: Any = None) -> RowKey:
        return super().add_row(*(plain(c) for c in cells), height=height, key=key, label=plain(label))

    def update_cell(self, row_key: RowKey | str, column_key: ColumnKey | str, value: CellType, *,
                    update_width: bool = False) -> None:
        super().update_cell(row_key, column_key, plain(value), update_width=update_width)


class ListTree(Tree):
    """A Tree that moves like every other list."""

    BINDINGS = LIST_KEYS + [Binding("home", "scroll_home", "First", show=False, id="list.first"),
                            Binding("end", "scroll_end", "Last", show=False, id="list.last"),
                            Binding("pageup", "page_up", show=False), Binding("pagedown", "page_down", show=False)]


def row_matches(filter_text: str, *texts: object) -> bool:
    """Whether a row passes a `/` filter: every word of it appears somewhere in the row (any case)."""
    haystack = " ".join(str(getattr(t, "plain", t) or "") for t in texts).casefold()
    return all(word in haystack for word in filter_text.casefold().split())


def cursor_key(table: DataTable) -> str | None:
    """The row key under the table's cursor, or None when the table is empty or the cursor is off the rows."""
    if table.row_count == 0:
        return None
    try:
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    except CellDoesNotExist:
        return None


def jump_to_next(table: DataTable, rows: list[int], step: int) -> None:
    """Move the cursor to the next (step 1) or previous (-1) of `rows` from where it is, wrapping around."""
    here = table.cursor_row
    later = [row for row in rows if (row - here) * step > 0]
    target = (later[0] if step > 0 else later[-1]) if later else (rows[0] if step > 0 else rows[-1])
    table.focus()
    table.move_cursor(row=target)
