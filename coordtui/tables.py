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
