"""EpisodesTable: the run screen's per-episode rows, updated in place as episodes end.

Rows arrive in batches from the run watcher. A new row is appended (or inserted with
one re-sort when the table is sorted otherwise than by index); a rewritten episode
(resume) updates its cells; the row under the cursor stays selected through both. The
table filters by status and by text without re-reading anything: it keeps every row
it was given and only changes which ones are shown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from evaltui.tui.display import NONE, STATE_COLOUR, duration, first_line, metric
from evaltui.tui.widgets.bars import theme_style
from evaltui.tui.widgets.row_table import RowTable

StatusFilter = Literal["all", "not-ok", "ok", "error", "timeout", "cancelled"]
STATUS_FILTERS: tuple[StatusFilter, ...] = ("all", "not-ok", "ok", "error", "timeout",
                                            "cancelled")


@dataclass(frozen=True)
class EpisodeColumn:
    """One column: its key, header, width and how a row sorts by it.

    ``priority`` decides which columns a narrow table keeps (lower is kept first);
    ``max_width`` is how far a wide table lets it grow (``width`` is its minimum).
    """

    key: str
    label: str
    width: int
    sort_key: Callable[[dict[str, Any]], Any]
    priority: int = 0
    max_width: int | None = None
    min_table: int = 0
    """Shown only in a table at least this wide (the scene id is a luxury)."""


def _number(name: str, *, metric: bool = False) -> Callable[[dict[str, Any]], Any]:
    """Sort by the row's number ``name`` (``metric``: its metric), missing ones first."""
    def key(row: dict[str, Any]) -> float:
        value = ((row.get("metrics") or {}) if metric else row).get(name)
        return value if isinstance(value, int | float) else float("-inf")
    return key


COLUMNS: tuple[EpisodeColumn, ...] = (
    EpisodeColumn("index", "#", 4, _number("episode_index"), 0),
    EpisodeColumn("episode", "episode", 14, lambda r: str(r.get("episode_id") or ""), 3, 32),
    EpisodeColumn("status", "status", 9, lambda r: str(r.get("status") or ""), 1),
    EpisodeColumn("success", "SR", 3, _number("success", metric=True), 2),
    EpisodeColumn("spl", "SPL", 5, _number("spl", metric=True), 4),
    EpisodeColumn("ndtw", "nDTW", 5, _number("ndtw", metric=True), 5),
    EpisodeColumn("steps", "steps", 5, _number("step_count"), 6),
    EpisodeColumn("time", "time", 7, _number("elapsed_sec"), 7),
    EpisodeColumn("scene", "scene", 16, lambda r: str(r.get("scene_id") or ""), 8, 40, 150),
    EpisodeColumn("worker", "wkr", 3, _number("worker_id"), 9),
    EpisodeColumn("attempts", "try", 3, _number("attempts"), 10),
    EpisodeColumn("detail", "instruction / error", 16, lambda r: str(r.get("instruction") or "")),
)
"""Every column, in display order; ``detail`` is last and takes the width left over."""
DETAIL = COLUMNS[-1]
SCROLLBAR = 2
"""Columns kept free for the vertical scrollbar, so no row ever scrolls sideways."""


def fit_columns(width: int, padding: int = 1, longest_id: int = 0) -> dict[str, int]:
    """Which columns a table ``width`` cells wide shows, and each one's width.

    The episode id is what users read and copy, so its column is as wide as the longest
    id (``longest_id``, up to its maximum) before lower-priority columns get any room.
    Columns are kept by priority while the detail column still gets its minimum; the
    width left then widens the episode and scene columns (a quarter each, up to their
    maximum) and the rest goes to the detail column, so a wide screen shows whole
    names rather than empty space.
    """
    def needed(column: EpisodeColumn) -> int:
        if column.key == "episode" and column.max_width is not None:
            return max(column.width, min(longest_id, column.max_width))
        return column.width

    room = width - SCROLLBAR - DETAIL.width - 2 * padding
    kept: set[str] = set()
    for column in sorted(COLUMNS[:-1], key=lambda c: c.priority):
        cost = needed(column) + 2 * padding
        if cost <= room and width >= column.min_table:
            kept.add(column.key)
            room -= cost
    widths = {c.key: needed(c) for c in COLUMNS[:-1] if c.key in kept}
    share = room // 4
    for column in COLUMNS[:-1]:
        if column.key in kept and column.max_width is not None:
            grow = max(0, min(share, column.max_width - widths[column.key]))
            widths[column.key] += grow
            room -= grow
    widths[DETAIL.key] = DETAIL.width + max(0, room)
    return widths


_BY_KEY = {c.key: c for c in COLUMNS}


class EpisodesTable(RowTable):
    """Episode rows of one run, sortable by any column, filterable by status and text."""

    BINDINGS = [Binding("enter", "select_cursor", "Replay")]

    DEFAULT_CSS = """
    EpisodesTable {
        height: 1fr;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._rows: dict[int, dict[str, Any]] = {}
        self.status_filter: StatusFilter = "all"
        self.text_filter = ""
        self.sort_column = "index"
        self.sort_reverse = False
        self._last_shown = -1
        """Highest index shown while sorted by index ascending (appends need no sort)."""
        self._widths: dict[str, int] = {}
        """Shown columns and their widths, in display order (set by ``_fit``)."""
        self._longest_id = 0
        """Length of the longest episode id given so far (its column fits it)."""

    def on_mount(self) -> None:
        self._fit(self.size.width or 80)
        self.app.theme_changed_signal.subscribe(self, lambda _: self._rebuild())

    def on_resize(self) -> None:
        self._fit(self.size.width)
        # A table made shorter (a line appeared above or below it) keeps its cursor row in
        # view: the scroll that brought it there was reckoned for the old height.
        self.call_after_refresh(self._cursor_into_view)

    def _cursor_into_view(self) -> None:
        if self.row_count and not self.cursor_on_screen():
            self.move_cursor(row=self.cursor_row, scroll=True)

    @property
    def visible_columns(self) -> list[str]:
        """Keys of the columns this width shows, in display order."""
        return list(self._widths)

    def _fit(self, width: int) -> None:
        """Choose the columns and widths for ``width`` (see :func:`fit_columns`)."""
        widths = fit_columns(width, self.cell_padding, self._longest_id)
        if widths == self._widths:
            return
        selected = self.selected_index()  # before the columns go, and the rows with them
        if list(widths) != list(self._widths):
            self.clear(columns=True)
            for column in COLUMNS:
                if column.key in widths:
                    self.add_column(column.label, key=column.key, width=widths[column.key])
        else:
            for key, w in widths.items():
                self.columns[key].width = w  # type: ignore[index]
        self._widths = widths
        self._rebuild(selected)  # the cell cache holds cells cut to the old widths

    # --- data ----------------------------------------------------------------------------

    @property
    def total(self) -> int:
        """Rows known, shown or not."""
        return len(self._rows)

    def counts(self) -> Counter[str]:
        """Rows by status, shown or not."""
        return Counter(str(r.get("status") or "?") for r in self._rows.values())

    def row_data(self, index: int) -> dict[str, Any] | None:
        return self._rows.get(index)

    def selected_index(self) -> int | None:
        """The episode index of the row under the cursor."""
        key = self.cursor_key()
        return int(key) if key is not None else None

    def cursor_on_screen(self) -> bool:
        """True if the row under the cursor is drawn, wholly, in the table's viewport.

        A table squeezed to its header (or scrolled away from the cursor) still has a
        cursor row; ``enter`` must not open a row the user cannot see.
        """
        if not self.row_count:
            return False
        region = self._get_row_region(self.cursor_row)
        header = self.header_height if self.show_header else 0
        top = region.y - header
        visible = self.scrollable_content_region.height - header
        return visible > 0 and self.scroll_y <= top and \
            top + region.height <= self.scroll_y + visible

    def action_select_cursor(self) -> None:
        """Select the cursor row only when it is on screen; otherwise bring it into view."""
        if self.cursor_on_screen():
            super().action_select_cursor()
        else:
            self._scroll_cursor_into_view()

    def upsert(self, rows: Iterable[dict[str, Any]]) -> None:
        """Add new rows and update rewritten ones, keeping the selected row selected."""
        rows = list(rows)
        longest = max((len(str(r.get("episode_id") or "")) for r in rows), default=0)
        if longest > self._longest_id:  # a longer id: widen its column first (rare)
            self._longest_id = longest
            self._fit(self.size.width or 80)
        selected = self.selected_index()
        needs_sort = False
        for row in rows:
            index = row.get("episode_index")
            if not isinstance(index, int):
                continue
            self._rows[index] = row
            key = str(index)
            shown = key in self.rows
            if not self._matches(row):
                if shown:
                    self.remove_row(key)
                continue
            cells = self._cells(row)
            if shown:
                for column, cell in zip(self._widths, cells, strict=True):
                    self.update_cell(key, column, cell)
                needs_sort = needs_sort or self.sort_column != "index"
                continue
            self.add_row(*cells, key=key)
            if self.sort_column == "index" and not self.sort_reverse and index > self._last_shown:
                self._last_shown = index
            else:
                needs_sort = True
        if needs_sort:
            self._sort()
        self._select(selected)

    # --- filter and sort ------------------------------------------------------------------

    def set_filter(self, *, status: StatusFilter | None = None, text: str | None = None) -> None:
        """Show only rows of ``status`` whose text contains ``text`` (case-insensitive)."""
        if status is not None:
            self.status_filter = status
        if text is not None:
            self.text_filter = text.strip().lower()
        self._rebuild()

    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        """Sort by ``column``; choosing the current column again flips the order."""
        if column not in _BY_KEY:
            raise ValueError(f"no column {column!r}")
        if reverse is None:
            reverse = not self.sort_reverse if column == self.sort_column else False
        self.sort_column, self.sort_reverse = column, reverse
        selected = self.selected_index()
        self._sort()
        self._select(selected)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(str(event.column_key.value))

    def _matches(self, row: dict[str, Any]) -> bool:
        status = row.get("status")
        wanted = self.status_filter
        if wanted == "not-ok" and status == "ok":
            return False
        if wanted not in ("all", "not-ok") and status != wanted:
            return False
        if self.text_filter:
            haystack = " ".join(str(row.get(k) or "") for k in
                                ("episode_index", "episode_id", "scene_id", "instruction",
                                 "status", "error")).lower()
            return self.text_filter in haystack
        return True

    def _sort(self) -> None:
        column = _BY_KEY[self.sort_column]
        rows = self._rows

        def key(index: int) -> Any:
            return (column.sort_key(rows[index]), index)

        self.sort("index", key=key, reverse=self.sort_reverse)
        self._last_shown = max((int(k.value or 0) for k in self.rows), default=-1) \
            if self.sort_column == "index" and not self.sort_reverse else -1

    def _rebuild(self, selected: int | None = None) -> None:
        """Rows again from ``_rows``; the cursor stays on the selected episode
        (``selected``, else the one under the cursor now) and in view."""
        if not self.columns:
            return
        if selected is None:
            selected = self.selected_index()
        self.clear()
        self._last_shown = -1
        for index in sorted(self._rows):
            row = self._rows[index]
            if self._matches(row):
                self.add_row(*self._cells(row), key=str(index))
                self._last_shown = index
        if self.sort_column != "index" or self.sort_reverse:
            self._sort()
        self._select(selected, scroll=True)  # clear() took the view back to the top

    def _select(self, index: int | None, *, scroll: bool = False) -> None:
        if index is not None:
            self.select_key(str(index), scroll=scroll)

    # --- cells ---------------------------------------------------------------------------

    def _cells(self, row: dict[str, Any]) -> list[Any]:
        app = self.app
        status = str(row.get("status") or "?")
        metrics = row.get("metrics") or {}
        success = metrics.get("success")
        if isinstance(success, int | float):
            sr = Text("✔" if success >= 1 else "✘",
                      style=theme_style(app, "success" if success >= 1 else "error"))
        else:
            sr = Text(NONE)
        error = first_line(row.get("error"))
        detail = Text(error, style=theme_style(app, "error")) if error and status != "ok" \
            else Text(str(row.get("instruction") or ""))
        detail.no_wrap, detail.overflow = True, "ellipsis"
        cells = {
            "index": row.get("episode_index"),
            "episode": Text(str(row.get("episode_id") or NONE), no_wrap=True,
                            overflow="ellipsis"),
            "status": Text(status, style=theme_style(app, STATE_COLOUR.get(status,
                                                                           "foreground"))),
            "success": sr,
            "spl": Text(metric(metrics.get("spl"), 2), justify="right"),
            "ndtw": Text(metric(metrics.get("ndtw"), 2), justify="right"),
            "steps": Text(str(row.get("step_count", NONE)), justify="right"),
            "time": Text(duration(row.get("elapsed_sec")), justify="right"),
            "scene": Text(str(row.get("scene_id") or NONE), no_wrap=True, overflow="ellipsis"),
            "worker": Text(str(row.get("worker_id", NONE)), justify="right"),
            "attempts": Text(str(row.get("attempts", NONE)), justify="right"),
            "detail": detail,
        }
        return [cells[key] for key in self._widths]
