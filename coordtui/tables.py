"""Small DataTable helpers shared by panes and operator screens."""
from __future__ import annotations

from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist


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
