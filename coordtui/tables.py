"""The list widgets every pane and operator screen uses (one list behaviour: j/k and the arrows move, Home/End
go to the first/last row, PageUp/PageDown a page; `/` filters, bound by the pane or screen), and small
DataTable helpers."""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual._two_way_dict import TwoWayDict
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Tree
from textual.widgets.data_table import CellDoesNotExist, CellKey, CellType, ColumnKey, RowKey


def _text_width(cell: Any) -> int:
    """The columns a text cell takes (its widest line); 0 for another renderable, which Textual measures."""
    if isinstance(cell, Text):
        return max((cell_len(line) for line in cell.plain.splitlines()), default=0)
    return cell_len(cell) if isinstance(cell, str) else 0


def plain(cell: Any) -> Any:
    """A str cell as plain Text: DataTable reads a str cell as markup, and server text must never be markup
    (`[link=https://elsewhere]shown[/link]` would be a hyperlink showing one text and opening another)."""
    return Text(cell) if isinstance(cell, str) else cell


# the keys every list adds to Textual's (arrows, PageUp/PageDown); ids for keys.toml
LIST_KEYS: list[BindingType] = [Binding("j", "cursor_down", "Down", show=False, id="list.down"),
             Binding("k", "cursor_up", "Up", show=False, id="list.up")]


class PlainTable(DataTable[Any]):
    """A DataTable whose str cells are shown as written, never interpreted as markup. Home/End go to the
    first/last row (DataTable's scroll sideways)."""

    BINDINGS: ClassVar[list[BindingType]] = LIST_KEYS + [
        Binding("home", "scroll_top", "First", show=False, id="list.first"),
        Binding("end", "scroll_bottom", "Last", show=False, id="list.last")]
    # column labels, least important first: what gives way when the rows are wider than the table; the
    # other columns (revoked, expired, archived: what matters) are never cut
    give_way: tuple[str, ...] = ()

    def fit_columns(self) -> None:
        """Columns as wide as their content when there is room, else the give-way columns narrower."""
        columns = list(self.columns.values())
        if not self.give_way or not columns:
            return
        labels = [column.label.plain for column in columns]
        natural = [max(self._widest_cell(column), cell_len(label)) for column, label in zip(columns, labels)]
        order = [labels.index(label) for label in self.give_way if label in labels]
        room = self.scrollable_content_region.width - 2 * self.cell_padding * len(columns)
        widths = fitted_widths(natural, [cell_len(label) for label in labels], order, room)
        for column, width in zip(columns, widths):
            column.auto_width, column.width = False, width
        # Textual has no public call for "a column's width changed": the same flags add_column sets
        self._require_update_dimensions = True
        self._clear_caches()
        self.refresh()

    def _widest_cell(self, column: Any) -> int:
        """The widest cell of `column` as it is now. Measured here: Textual measures new rows when it is next
        idle, and a fit before that (a resize, or a refresh that came first on a loaded machine) saw only the
        headers and cut what matters (a token's revoked date to "Revoked")."""
        widest = 0
        for cell in self.get_column(column.key):
            # another renderable: as Textual measured it
            widest = max(widest, _text_width(cell) if isinstance(cell, (Text, str)) else column.content_width)
        return widest

    def on_resize(self, event: events.Resize) -> None:
        self.fit_columns()

    def clear(self, columns: bool = False) -> "PlainTable":
        """Rows cleared, columns kept: their widths start again from their headers (Textual keeps the widest
        content ever shown, so a long row gone long ago kept its column wide, and the picture depended on
        what had been listed before)."""
        super().clear(columns)
        for column in self.columns.values():
            column.content_width = cell_len(column.label.plain)
        return self

    def add_row(self, *cells: CellType, height: int | None = 1, key: str | None = None,
                label: Any = None) -> RowKey:
        """Textual measures a new row when the table is next idle, and a table that hears nothing after being
        refilled (a pane repainted under a form, seen at 80x24 in tmux) kept the header widths clear() had
        left it with, "Disk full on db-7" cut to "Disk" until a key was pressed: text cells count here."""
        shown = [plain(c) for c in cells]
        row_key = super().add_row(*shown, height=height, key=key, label=plain(label))
        for column, cell in zip(self.ordered_columns, shown):
            column.content_width = max(column.content_width, _text_width(cell))
        return row_key

    def show_rows(self, rows: Sequence[tuple[str, Sequence[CellType]]]) -> bool:
        """The table shows exactly `rows` (key, cells), in that order, changing only what differs: a row kept
        with the same cells is neither rebuilt nor measured again, the rows gone are dropped in one pass
        (Textual's remove_row renumbers every row for each one), the new ones are added. For a `/` filter on
        every key: with 2,000 rows, rebuilding the whole table took over 100 ms a key. Whether anything changed.
        Column widths only grow, as with add_row; clear() starts them again."""
        new = {key: [plain(cell) for cell in cells] for key, cells in rows}
        order = list(new)
        data: dict[Any, dict[ColumnKey, CellType]] = self._data  # a str finds its RowKey (same hash, equal)
        shown = [key.value for key in data]  # in display order: add_row appends, and show_rows keeps it so

        def same(key: str) -> bool:
            cells = new[key]
            return list(data[key].values())[:len(cells)] == cells
        kept = [key for key in shown if key in new and same(key)]
        if kept == shown == order:
            return False
        keep = set(kept)
        for key in shown:
            if key not in keep:
                row_key = RowKey(key)
                for column_key in self._data[row_key]:
                    self._updated_cells.discard(CellKey(row_key, column_key))
                self._new_rows.discard(row_key)
                del self.rows[row_key], self._data[row_key]
        self._row_locations = TwoWayDict({RowKey(key): index for index, key in enumerate(kept)})
        for key in order:
            if key not in keep:
                self.add_row(*new[key], key=key)  # appended, its text measured at once
        # Textual has no public call for "the rows are in this order now": what sort() sets; `rows` (which
        # callers iterate) in the same order, as after add_row
        keys = [RowKey(key) for key in order]
        self._row_locations = TwoWayDict({key: index for index, key in enumerate(keys)})
        self.rows = {key: self.rows[key] for key in keys}
        self._data = {key: self._data[key] for key in keys}
        self._update_count += 1
        self._require_update_dimensions = True  # the scrollable height follows the row count
        self.cursor_coordinate = self.cursor_coordinate  # kept on the rows
        self.check_idle()
        self.refresh(layout=True)
        return True

    def set_label(self, column_key: str, label: Text) -> None:
        """A column's header text, shown at once (Textual caches a rendered header until a row changes: the
        Swarm board's "Queued 0" showed as "Queued" until a card moved)."""
        column = self.columns.get(ColumnKey(column_key))
        if column is None or column.label == label:
            return
        column.label = label
        column.content_width = max(column.content_width, cell_len(label.plain))
        self._clear_caches()
        self.refresh()

    def update_cell(self, row_key: RowKey | str, column_key: ColumnKey | str, value: CellType, *,
                    update_width: bool = False) -> None:
        super().update_cell(row_key, column_key, plain(value), update_width=update_width)


def fitted_widths(natural: list[int], labels: list[int], order: list[int], room: int) -> list[int]:
    """Column widths within `room`: the columns in `order` give way in turn, first down to their header's
    width, then down to 3; columns not in `order` keep their natural width."""
    widths = list(natural)
    for floor in (labels, [3] * len(natural)):
        for index in order:
            excess = sum(widths) - room
            if excess <= 0:
                return widths
            widths[index] -= max(0, min(excess, widths[index] - min(floor[index], natural[index])))
    return widths


class ListTree(Tree[str]):
    """A Tree that moves like every other list."""

    BINDINGS: ClassVar[list[BindingType]] = LIST_KEYS + [
        Binding("home", "scroll_home", "First", show=False, id="list.first"),
        Binding("end", "scroll_end", "Last", show=False, id="list.last"),
        Binding("pageup", "page_up", show=False), Binding("pagedown", "page_down", show=False)]


def row_matches(filter_text: str, *texts: object) -> bool:
    """Whether a row passes a `/` filter: every word of it appears somewhere in the row (any case)."""
    haystack = " ".join(str(getattr(t, "plain", t) or "") for t in texts).casefold()
    return all(word in haystack for word in filter_text.casefold().split())


def cursor_key(table: DataTable[Any]) -> str | None:
    """The row key under the table's cursor, or None when the table is empty or the cursor is off the rows."""
    if table.row_count == 0:
        return None
    try:
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    except CellDoesNotExist:
        return None


def jump_to_next(table: DataTable[Any], rows: list[int], step: int) -> None:
    """Move the cursor to the next (step 1) or previous (-1) of `rows` from where it is, wrapping around."""
    here = table.cursor_row
    later = [row for row in rows if (row - here) * step > 0]
    target = (later[0] if step > 0 else later[-1]) if later else (rows[0] if step > 0 else rows[-1])
    table.focus()
    table.move_cursor(row=target)


class SectionedTable(PlainTable):
    """A PlainTable with section headers (rows keyed `group:…`): the cursor keys (j/k, arrows, PageUp/PageDown,
    Home/End) go to items only, past the headers. The cursor may still be put on a header by the pane (Wake
    starts there, so that a digit switches panes rather than answering a question nobody chose)."""

    SECTION = "group:"

    def item_rows(self) -> list[int]:
        return [index for index, key in enumerate(self.rows) if not str(key.value).startswith(self.SECTION)]

    def _to_item(self, step: int) -> None:
        """From where the cursor is, on to the nearest item in the direction of `step` (else the other way)."""
        items = self.item_rows()
        if not items or self.cursor_row in items:
            return
        ahead = [row for row in items if (row - self.cursor_row) * step > 0]
        self.move_cursor(row=(ahead[0] if step > 0 else ahead[-1]) if ahead else
                         (items[-1] if step > 0 else items[0]))

    def action_cursor_down(self) -> None:
        items = [row for row in self.item_rows() if row > self.cursor_row]
        if items:
            self.move_cursor(row=items[0])

    def action_cursor_up(self) -> None:
        items = [row for row in self.item_rows() if row < self.cursor_row]
        if items:
            self.move_cursor(row=items[-1])

    def action_page_down(self) -> None:
        super().action_page_down()
        self._to_item(1)

    def action_page_up(self) -> None:
        super().action_page_up()
        self._to_item(-1)

    def action_scroll_top(self) -> None:
        items = self.item_rows()
        if items:
            self.move_cursor(row=items[0])

    def action_scroll_bottom(self) -> None:
        items = self.item_rows()
        if items:
            self.move_cursor(row=items[-1])
