"""RowTable: a DataTable with a row cursor and the keys people expect of a list.

Textual's DataTable binds home/end to the first and last *column* and has no j/k, so in
a row table end only scrolled sideways. Here home/end go to the first and last row
(ctrl+home/ctrl+end still do) and j/k move down and up, as in less, vim or k9s.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist


class RowTable(DataTable[Any]):
    """A row-cursor table: ↑/↓ or k/j, home/end for the first and last row."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Pairs share a description: help shows each pair once, by its key_display.
        Binding("home", "scroll_top", "Rows", key_display="home/end", show=False,
                tooltip="first / last row"),
        Binding("end", "scroll_bottom", "Rows", show=False),
        Binding("j", "cursor_down", "Move", key_display="j/k ↓/↑", show=False,
                tooltip="next / previous row"),
        Binding("k", "cursor_up", "Move", show=False),
    ]

    def cursor_key(self) -> str | None:
        """The key of the row under the cursor (None: no rows, or a cursor mid-update)."""
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:  # an empty table or a cursor mid-update
            return None
        return key.value

    def select_key(self, key: str, *, scroll: bool = False) -> None:
        """Put the cursor on the row ``key``, if it is shown."""
        try:
            row = self.get_row_index(key)
        except RowDoesNotExist:
            return
        if row != self.cursor_row or scroll:
            self.move_cursor(row=row, scroll=scroll)
