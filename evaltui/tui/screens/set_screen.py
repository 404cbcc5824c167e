"""SetScreen: one experiment set -- its table and, for a checkpoint axis, each metric over
the steps.

The table is ``evaltui set show``'s (:mod:`evaltui.sets.table`, read from the run dirs
alone): a row per member, mean [95% CI] per metric, the best per metric bold and marked
``▲``. The table shows what fits its width (success and spl; pivoted, success alone at
80 columns; a checkpoint's file name and an all-``done`` state column left to the
header). ``p`` spreads an axis over the columns (each axis worth it in turn, then back:
a checkpoint set's one axis has nothing to pivot); enter opens the selected member's run
screen; ``x`` compares the member with the set's baseline in the
compare screen. The table is read in a thread worker, again every ``refresh_sec`` while
a member has not finished.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Static

from evaltui.contract.setspec import member_label
from evaltui.results.tablewriter import Grid, column_widths, fit_grid
from evaltui.sets.render import (
    TERMINAL_METRICS,
    compact_grid,
    member_grid,
    pivot_choices,
    pivot_grid,
)
from evaltui.sets.setdir import SetDirError, read_set
from evaltui.sets.table import build_table
from evaltui.sets.textplot import plot_series
from evaltui.tui.backend import readable_dir
from evaltui.tui.messages import Latest
from evaltui.tui.screens.compare import CompareScreen
from evaltui.tui.widgets.keys_footer import KeysFooter
from evaltui.tui.widgets.set_plot import SetPlot

BEST_MARK = " ▲"
FINISHED = frozenset({"done", "failed", "aborted", "cancelled"})


class SetTableLoaded(Latest):
    """A fresh read of the set (``table`` None: ``error`` says why)."""

    def __init__(self, table: Any, baseline: dict[str, Any] | None, error: str | None) -> None:
        super().__init__()
        self.table = table
        self.baseline = baseline
        self.error = error


class SetScreen(Screen[None]):
    """A set's table, its plot over checkpoints, and its members' runs a key away."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: the table's own enter would hide the key from the footer
        Binding("enter", "open_member", "Open", priority=True),
        Binding("x", "compare", "vs baseline"),
        Binding("p", "pivot", "Pivot"),
        Binding("escape", "back", "Back"),
    ]
    CORE_KEYS: ClassVar[tuple[str, ...]] = ("back", "open_member", "compare", "pivot")
    """What the footer keeps at 80 columns, most important first (see KeysFooter)."""

    def __init__(self, set_dir: Path, *, refresh_sec: float = 2.0) -> None:
        super().__init__()
        self.set_dir = Path(set_dir)
        self.refresh_sec = refresh_sec
        self.table: Any = None
        self.baseline_axes: dict[str, Any] | None = None
        self.pivot: str | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="set-header")
        yield DataTable(id="set-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="set-notes", markup=False)  # "[95% CI]" is text, not a tag
        yield Horizontal(id="set-plots")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#set-plots").display = False
        self.load()
        self.set_interval(self.refresh_sec, self._refresh_if_live)

    def _refresh_if_live(self) -> None:
        if self.table is None or any(r.state not in FINISHED for r in self.table.rows):
            self.load()

    @work(thread=True, exclusive=True, group="set-table", exit_on_error=False)
    def load(self) -> None:
        """Read set.json and the members' run dirs (thread)."""

        try:
            record = read_set(self.set_dir)
            table = build_table(record, self.set_dir.parent.parent)
        except (SetDirError, OSError, ValueError) as exc:
            self.post_message(SetTableLoaded(None, None, str(exc)))
            return
        entry = record.file.get("baseline")
        self.post_message(SetTableLoaded(table, entry if isinstance(entry, dict) else None,
                                         None))

    def on_set_table_loaded(self, message: SetTableLoaded) -> None:
        self.error = message.error
        if message.table is not None:
            self.table = message.table
            self.baseline_axes = message.baseline
        self._show()

    # --- display -------------------------------------------------------------------------

    def _show(self) -> None:
        header = self.query_one("#set-header", Static)
        if self.table is None:
            header.update(f"set {self.set_dir.name}: {self.error or 'reading…'}")
            return
        table = self.table
        done = sum(r.state == "done" for r in table.rows)
        base = self.baseline_row()
        parts = [f"[b]set {table.set_id}[/b]", f"{done}/{len(table.rows)} done"]
        if base is not None:
            parts.append("baseline " + member_label(self.baseline_axes or {}))
        if self.pivot:
            parts.append(f"pivot {self.pivot}")
        if self.error:
            parts.append(f"[red]{self.error}[/red]")
        header.update(" · ".join(parts))
        self._fill_table()
        self._show_plots()

    def _grid(self) -> Grid:
        metrics = [m for m in TERMINAL_METRICS if m in self.table.metrics] or self.table.metrics
        width = self.query_one("#set-table", DataTable).size.width or self.app.size.width
        # As many metrics as fit, success first.
        return fit_grid(lambda names: pivot_grid(self.table, names, self.pivot, 3) if self.pivot
                        else compact_grid(self.table, member_grid(self.table, names, 3)),
                        metrics, width, measure=_grid_width)[0]

    def _fill_table(self) -> None:
        widget = self.query_one("#set-table", DataTable)
        grid = self._grid()
        row = widget.cursor_row
        widget.clear(columns=True)
        # Widths given, not measured: a refill (a pivot, a refresh) kept the headers' widths
        # and cut every cell to them.
        for width, header in zip(column_widths(grid, BEST_MARK), grid.headers, strict=True):
            widget.add_column(header, width=width)
        for i, cells in enumerate(grid.rows):
            shown = [Text(c + BEST_MARK, style="bold") if (i, j) in grid.bold else Text(c)
                     for j, c in enumerate(cells)]
            widget.add_row(*shown)
        if grid.rows:
            widget.move_cursor(row=min(row, len(grid.rows) - 1))
        notes = [n.replace("bold:", f"bold,{BEST_MARK}:", 1) for n in grid.notes]
        self.query_one("#set-notes", Static).update("\n".join(notes))

    def _show_plots(self) -> None:

        series = plot_series(self.table, list(TERMINAL_METRICS))
        box = self.query_one("#set-plots", Horizontal)
        box.display = bool(series)
        shown = [p.series for p in box.query(SetPlot)]
        if shown == series:
            return
        box.remove_children()
        box.mount_all(SetPlot(s, classes="set-plot") for s in series)

    def on_resize(self) -> None:
        if self.table is not None:
            self.call_after_refresh(self._fill_table)

    # --- selection -----------------------------------------------------------------------

    def baseline_row(self) -> Any:
        """The member the set file names as its baseline (None: no baseline)."""
        if self.table is None or not self.baseline_axes:
            return None
        hits = [r for r in self.table.rows
                if all(r.axes.get(k) == v for k, v in self.baseline_axes.items())]
        return hits[0] if len(hits) == 1 else None

    def selected_member(self) -> Any:
        if self.table is None:
            return None
        if self.pivot:
            self.notify("a pivoted row is several members: press p until the pivot is off "
                        "to pick one", timeout=4)
            return None
        row = self.query_one("#set-table", DataTable).cursor_row
        return self.table.rows[row] if 0 <= row < len(self.table.rows) else None

    @on(DataTable.RowSelected, "#set-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_member()

    def action_open_member(self) -> None:
        member = self.selected_member()
        if member is None:
            return
        if member.run_dir is None or not readable_dir(member.run_dir):
            self.notify(f"{member_label(member.axes)} has no run dir yet ({member.state})",
                        severity="warning", timeout=4)
            return
        self.app.open_run(member.run_dir)  # type: ignore[attr-defined]

    def action_compare(self) -> None:
        member = self.selected_member()
        if member is None:
            return
        base = self.baseline_row()
        if base is None:
            self.notify("the set file names no baseline (baseline: {axis: value})",
                        severity="warning", timeout=5)
            return
        if member.key == base.key:
            self.notify("this member is the baseline: pick another one", timeout=4)
            return
        dirs = [r.run_dir for r in (base, member)]
        if not all(d is not None and readable_dir(d) for d in dirs):
            self.notify("the member or the baseline has no readable run dir yet",
                        severity="warning", timeout=5)
            return
        self.app.push_screen(CompareScreen(dirs[0], dirs[1]))

    def action_pivot(self) -> None:
        """Spread the next axis worth it over the columns; after the last, no pivot."""

        if self.table is None:
            return
        axes = pivot_choices(self.table)
        if not axes:
            self.notify("one axis (" + ", ".join(self.table.axes) + "): a pivot would "
                        "give a row per member, as now", timeout=4)
            return
        cycle = [*axes, None]  # no pivot, then each axis in turn
        self.pivot = cycle[(cycle.index(self.pivot) + 1) % len(cycle)] \
            if self.pivot in cycle else None
        self._show()

    def action_back(self) -> None:
        self.app.pop_screen()


def _grid_width(grid: Grid) -> int:
    """The DataTable's width of ``grid``: its columns and a cell of padding on either
    side of each."""
    return sum(w + 2 for w in column_widths(grid, BEST_MARK))

