"""RunsTable: every run of the backend, one row each, updated in place every poll.

Rows are keyed by run_id: a poll updates the cells that changed, adds and removes rows,
and re-orders only when the order changed, so the row under the cursor stays selected
and the view does not jump while runs progress. For a queued run the last column says
why it waits; for a failed one, why it failed; otherwise it shows SR, SPL and nDTW.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist

from evaltui.states import RunState
from evaltui.tui.backend import RunInfo
from evaltui.tui.display import (
    NONE,
    STATE_COLOUR,
    STATE_GLYPH,
    age,
    first_line,
    gib,
    seconds_between,
)
from evaltui.tui.widgets.bars import stacked_bar, theme_style

COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("run_id", "run", 17),
    ("graph", "graph", 12),
    ("data", "data/split", 12),
    ("state", "state", 11),
    ("progress", "progress", 11),
    ("workers", "wkr", 3),
    ("vram", "VRAM e/m", 9),
    ("priority", "pri", 3),
    ("age", "age", 3),
    ("detail", "SR    SPL   nDTW  / why waiting", 18),
)
FAILED = (RunState.FAILED, RunState.ABORTED)


class RunsTable(DataTable[Any]):
    """The queue screen's table of runs."""

    BINDINGS = [Binding("enter", "select_cursor", "Open")]

    DEFAULT_CSS = """
    RunsTable {
        height: 1fr;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._runs: dict[str, RunInfo] = {}
        self._order: list[str] = []
        self._shown: dict[str, tuple[Any, ...]] = {}
        self.text_filter = ""
        self._now: datetime | None = None

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)
        self.app.theme_changed_signal.subscribe(self, lambda _: self._refill())

    def on_resize(self) -> None:
        fixed = sum(w + 2 * self.cell_padding for _, _, w in COLUMNS[:-1])
        column = self.columns.get(COLUMNS[-1][0])  # type: ignore[call-overload]
        width = max(18, self.size.width - fixed - 2 * self.cell_padding - 1)
        if column is not None and column.width != width:
            column.width = width
            self._refill()

    @property
    def selected(self) -> RunInfo | None:
        """The run under the cursor."""
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:  # empty or mid-update
            return None
        return self._runs.get(str(key.value))

    def run(self, run_id: str) -> RunInfo | None:
        return self._runs.get(run_id)

    def update_runs(self, runs: Sequence[RunInfo], now: datetime) -> None:
        """Show ``runs`` in this order (filtered), changing only what changed."""
        self._runs = {r.run_id: r for r in runs}
        self._order = [r.run_id for r in runs]
        self._now = now
        self._apply()

    def set_filter(self, text: str) -> None:
        self.text_filter = text.strip().lower()
        self._apply()

    @property
    def shown(self) -> int:
        return self.row_count

    def _matches(self, run: RunInfo) -> bool:
        if not self.text_filter:
            return True
        haystack = " ".join([run.run_id, run.graph, run.dataset, run.split, run.state.value,
                             run.waiting_reason or "", run.error or "",
                             run.command or ""]).lower()
        return self.text_filter in haystack

    def _apply(self) -> None:
        selected = self.selected
        wanted = [rid for rid in self._order if self._matches(self._runs[rid])]
        wanted_set = set(wanted)
        for rid in list(self._shown):
            if rid not in wanted_set:
                self.remove_row(rid)
                del self._shown[rid]
        for rid in wanted:
            cells = tuple(self._cells(self._runs[rid]))
            old = self._shown.get(rid)
            if old is None:
                self.add_row(*cells, key=rid)
            elif old != cells:
                for (key, _, _), cell, before in zip(COLUMNS, cells, old, strict=True):
                    if cell != before:
                        self.update_cell(rid, key, cell)
            self._shown[rid] = cells
        current = [str(row.key.value) for row in self.ordered_rows]
        if current != wanted:
            position = {rid: i for i, rid in enumerate(wanted)}
            self.sort("run_id", key=lambda rid: position[rid])
        if selected is not None:
            self._select(selected.run_id)

    def _refill(self) -> None:
        """Rebuild every row (after a theme or width change: cells hold old styles/widths)."""
        self.clear()
        self._shown.clear()
        self._apply()

    def _select(self, run_id: str) -> None:
        try:
            row = self.get_row_index(run_id)
        except RowDoesNotExist:
            return
        if row != self.cursor_row:
            self.move_cursor(row=row, scroll=False)

    def _cells(self, run: RunInfo) -> list[Any]:
        app = self.app
        muted = theme_style(app, "foreground-muted")
        state = Text(f"{STATE_GLYPH[run.state]} {run.state.value}",
                     style=theme_style(app, STATE_COLOUR[run.state]))
        if run.file_error:
            state = Text("⚠ ", style=theme_style(app, "error", bold=True)) + state
        if run.kind == "admit":  # a command `evaltui run` wraps: its profile and command
            data = run.command or ""
            progress = Text("evaltui run", style=muted)
            workers = Text(NONE, justify="right", style=muted)
        else:
            data = f"{_short(run.dataset)}/{run.split}"
            total = max(run.episodes_total, 1)
            progress = stacked_bar(2, [(run.episodes_finished, theme_style(app, "primary"))],
                                   total, theme_style(app, "panel"))
            progress.append(f" {run.episodes_finished}/{run.episodes_total}")
            workers = Text(str(run.worker_count), justify="right")
        vram = Text(f"{gib(run.vram_estimate_mb)}/{gib(run.vram_measured_mb)}",
                    justify="right")
        queued_for = seconds_between(run.queued_at, self._now) if self._now else None
        return [
            run.run_id,
            Text(run.graph, no_wrap=True, overflow="ellipsis"),
            Text(data, no_wrap=True, overflow="ellipsis"),
            state,
            progress,
            workers,
            vram,
            Text(str(run.priority), justify="right"),
            Text(age(queued_for), justify="right", style=muted),
            self._detail(run),
        ]

    def _detail(self, run: RunInfo) -> Text:
        app = self.app
        if run.file_error or (run.state in FAILED and run.error):
            text = Text(first_line(run.error), style=theme_style(app, "error"))
        elif run.state is RunState.QUEUED:
            text = Text(run.waiting_reason or "waiting for the next tick",
                        style=theme_style(app, "warning"))
        elif run.metrics:
            m = run.metrics
            text = Text(" ".join(_metric(m.get(k)) for k in ("success", "spl", "ndtw")))
        else:
            text = Text(NONE, style=theme_style(app, "foreground-muted"))
        text.no_wrap, text.overflow = True, "ellipsis"
        return text


def _metric(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "  —  "


def _short(dataset: str) -> str:
    """A dataset path shown by its file name; ``babyai`` as it is."""
    return Path(dataset).name if "/" in dataset else dataset
