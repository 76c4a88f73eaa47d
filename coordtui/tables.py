"""Small DataTable helpers shared by panes and operator screens, and the table they all use."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, CellType, ColumnKey, RowKey


def plain(cell: Any) -> Any:
    """A str cell as plain Text: DataTable reads a str cell as markup, and server text must never be markup
    (`[link=https://elsewhere]shown[/link]` would be a hyperlink showing one text and opening another)."""
    return Text(cell) if isinstance(cell, str) else cell


class PlainTable(DataTable):
    """A DataTable whose str cells are shown as written, never interpreted as markup."""

    def add_row(self, *cells: CellType, height: int | None = 1, key: str | None = None,
                label: Any = None) -> RowKey:
        return super().add_row(*(plain(c) for c in cells), height=height, key=key, label=plain(label))

    def update_cell(self, row_key: RowKey | str, column_key: ColumnKey | str, value: CellType, *,
                    update_width: bool = False) -> None:
        super().update_cell(row_key, column_key, plain(value), update_width=update_width)


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
