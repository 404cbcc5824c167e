"""RunsTable: every run of the backend, one row each, updated in place every poll.

Rows are keyed by run_id: a poll updates the cells that changed, adds and removes rows,
and re-orders only when the order changed, so the row under the cursor stays selected
and the view does not jump while runs progress. Which columns show, and how wide, depends
on the width (:mod:`~evaltui.tui.widgets.runs_columns`): state, name, progress, SR and
why a run waits or failed come first; a node column joins them once a run has a Ray node
(``--ray``). Two runs can be marked (A and B) for a comparison, and ``o`` on the queue
screen cycles the sort column (shown by an arrow in its header).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.binding import Binding

from evaltui.contract.states import RunState
from evaltui.contract.units import gib
from evaltui.tui.backend import RunInfo
from evaltui.tui.display import (
    NONE,
    STATE_COLOUR,
    STATE_GLYPH,
    age,
    first_line,
    seconds_between,
)
from evaltui.tui.widgets.bars import stacked_bar, theme_style
from evaltui.tui.widgets.row_table import RowTable
from evaltui.tui.widgets.runs_columns import BAR_ROOM, SORTS, RunColumn, fit_columns, sort_runs

FAILED = (RunState.FAILED, RunState.ABORTED)
MARKS = ("A", "B")
SOURCE_MARK = {"calibrated": "c", "partly calibrated": "p", "declared": "",
               "whole_gpu": "w"}
"""A letter after the VRAM estimate saying where it came from (nothing: as declared)."""


class RunsTable(RowTable):
    """The queue screen's table of runs."""

    BINDINGS = [Binding("enter", "select_cursor", "Open")]

    DEFAULT_CSS = """
    RunsTable {
        height: 1fr;
    }
    RunsTable.-stale {
        tint: $background 45%;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._runs: dict[str, RunInfo] = {}
        self._order: list[str] = []
        self._shown: dict[str, tuple[Any, ...]] = {}
        self._layout: list[tuple[RunColumn, int]] = []
        self.text_filter = ""
        self.sort_index = 0
        """Index into ``runs_columns.SORTS`` (0: queue order)."""
        self.marks: list[str] = []
        """Marked run ids, A then B (for a comparison)."""
        self._now: datetime | None = None
        self._count_room = 0
        """Width of the longest ``finished/total`` count (the bars stop before it)."""

    def on_mount(self) -> None:
        self._relayout()
        self.app.theme_changed_signal.subscribe(self, lambda _: self._refill())

    def on_resize(self) -> None:
        self._relayout()

    @property
    def column_keys(self) -> list[str]:
        """The keys of the columns shown at the current width."""
        return [c.key for c, _ in self._layout]

    def _relayout(self) -> None:
        """Choose the columns for the width; rebuild them when the choice changed."""
        width = self.size.width - self.styles.scrollbar_size_vertical
        if width <= 0:
            return
        self._count_room = max((len(_count(r)) for r in self._runs.values()), default=0)
        wanted = {"run_id": max((len(r.run_id) for r in self._runs.values()), default=0),
                  "graph": max((len(r.graph) for r in self._runs.values()), default=0),
                  "progress": BAR_ROOM + 1 + self._count_room,
                  "why": max((len(_why_text(r)) for r in self._runs.values()), default=0),
                  "data": max((len(_data(r)) for r in self._runs.values()), default=0),
                  "node": max((len(r.node or "") for r in self._runs.values()), default=0)}
        layout = fit_columns(width, wanted, nodes=wanted["node"] > 0)
        labels = [self._label(c) for c, _ in layout]
        current = [(c, w) for c, w in self._layout]
        if layout == current and labels == [str(c.label) for c in self.columns.values()]:
            return
        self._layout = layout
        self.clear(columns=True)
        self._shown.clear()
        for (column, width), label in zip(layout, labels, strict=True):
            self.add_column(label, key=column.key, width=width)
        self._apply()

    def _label(self, column: RunColumn) -> str:
        sorted_by = SORTS[self.sort_index][0]
        return f"{column.label} ▼" if sorted_by == column.key and column.key else column.label

    @property
    def selected(self) -> RunInfo | None:
        """The run under the cursor."""
        key = self.cursor_key()
        return self._runs.get(key) if key is not None else None

    def run(self, run_id: str) -> RunInfo | None:
        return self._runs.get(run_id)

    @property
    def all_runs(self) -> list[RunInfo]:
        """Every run of the last poll, in the backend's order (filter and sort aside)."""
        return [self._runs[rid] for rid in self._order]

    def update_runs(self, runs: Sequence[RunInfo], now: datetime) -> None:
        """Show ``runs`` in this order (filtered, sorted), changing only what changed."""
        self._runs = {r.run_id: r for r in runs}
        self._order = [r.run_id for r in runs]
        self.marks = [m for m in self.marks if m in self._runs]
        self._now = now
        # The counts' room before the cells: a bar drawn with the last poll's room stayed
        # a cell off whenever the columns did not change (the snapshots differed by run).
        self._count_room = max((len(_count(r)) for r in self._runs.values()), default=0)
        self._apply()
        self._relayout()  # a longer name may now fit

    def set_filter(self, text: str) -> None:
        self.text_filter = text.strip().lower()
        self._apply()

    def cycle_sort(self) -> str:
        """Sort by the next column; returns what the runs are now sorted by."""
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self._relayout()
        self._apply()
        return SORTS[self.sort_index][1]

    @property
    def sorted_by(self) -> str:
        return SORTS[self.sort_index][1]

    def toggle_mark(self, run_id: str) -> None:
        """Mark ``run_id`` (A, then B; a third mark replaces the older one) or unmark it."""
        if run_id in self.marks:
            self.marks.remove(run_id)
        else:
            self.marks = [*self.marks, run_id][-len(MARKS):]
        self._apply()

    def _matches(self, run: RunInfo) -> bool:
        if not self.text_filter:
            return True
        haystack = " ".join([run.run_id, run.graph, run.dataset, run.split, run.state.value,
                             run.waiting_reason or "", run.error or "",
                             run.command or "", run.node or "", run.url or ""]).lower()
        return self.text_filter in haystack

    def _apply(self) -> None:
        if not self._layout:
            return
        selected = self.selected
        keys = self.column_keys
        ordered = sort_runs([self._runs[rid] for rid in self._order], self.sort_index)
        wanted = [r.run_id for r in ordered if self._matches(r)]
        wanted_set = set(wanted)
        for rid in list(self._shown):
            if rid not in wanted_set:
                self.remove_row(rid)
                del self._shown[rid]
        for rid in wanted:
            cells = self._cells(self._runs[rid], keys)
            old = self._shown.get(rid)
            if old is None:
                self.add_row(*cells, key=rid)
            elif old != cells:
                for key, cell, before in zip(keys, cells, old, strict=True):
                    if cell != before:
                        self.update_cell(rid, key, cell)
            self._shown[rid] = cells
        current = [str(row.key.value) for row in self.ordered_rows]
        if current != wanted:
            # Order changes are rare (a state change, a new sort): add the rows again in
            # order, rather than sort by a column that may not be shown at this width.
            self.clear()
            for rid in wanted:
                self.add_row(*self._shown[rid], key=rid)
        if selected is not None:
            self.select_key(selected.run_id)

    def _refill(self) -> None:
        """Rebuild every row (after a theme change: cells hold old styles)."""
        self.clear()
        self._shown.clear()
        self._apply()

    def _cells(self, run: RunInfo, keys: Sequence[str]) -> tuple[Any, ...]:
        app = self.app
        muted = theme_style(app, "foreground-muted")
        cells: dict[str, Any] = {}
        mark = MARKS[self.marks.index(run.run_id)] if run.run_id in self.marks else " "
        cells["mark"] = Text(mark, style=theme_style(app, "background", bold=True,
                                                        background="accent")
                             if mark != " " else "")
        state = Text(f"{STATE_GLYPH[run.state]} {run.state.value}",
                     style=theme_style(app, STATE_COLOUR[run.state]))
        if run.file_error:
            state = Text("⚠ ", style=theme_style(app, "error", bold=True)) + state
        cells["state"] = state
        cells["run_id"] = run.run_id
        cells["graph"] = Text(run.graph, no_wrap=True, overflow="ellipsis")
        cells["node"] = Text(run.node or "", no_wrap=True, overflow="ellipsis")
        if run.kind == "admit":  # a command `evaltui run` wraps: its profile and command
            cells["data"] = Text(run.command or "", no_wrap=True, overflow="ellipsis")
            cells["progress"] = Text("evaltui run", style=muted)
            cells["workers"] = Text(NONE, justify="right", style=muted)
        elif run.kind == "serve":  # `evaltui serve-policy`: where it serves, how much
            cells["data"] = Text(run.url or run.command or "", no_wrap=True,
                                 overflow="ellipsis")
            served = f" {run.requests_served} req" if run.requests_served is not None else ""
            cells["progress"] = Text(f"serve{served}", style=muted)
            cells["workers"] = Text(NONE, justify="right", style=muted)
        else:
            cells["data"] = Text(_data(run), no_wrap=True, overflow="ellipsis")
            total = max(run.episodes_total, 1)
            # The bar takes what the longest count leaves of the column (counts align).
            room = max(self._count_room, len(_count(run)))
            bar = max(2, min(BAR_ROOM, self._width_of("progress") - room - 1))
            progress = stacked_bar(bar, [(run.episodes_finished, theme_style(app, "primary"))],
                                   total, theme_style(app, "panel"))
            progress.append(f" {_count(run)}")
            cells["progress"] = progress
            cells["workers"] = Text(str(run.worker_count), justify="right")
        for key, name in (("sr", "success"), ("spl", "spl"), ("ndtw", "ndtw")):
            value = run.metrics.get(name)
            cells[key] = Text(f"{value:.3f}" if value is not None else NONE, justify="right",
                              style="" if value is not None else muted)
        cells["vram"] = self._vram(run)
        cells["priority"] = Text(str(run.priority), justify="right")
        queued_for = seconds_between(run.queued_at, self._now) if self._now else None
        cells["age"] = Text(age(queued_for), justify="right", style=muted)
        cells["why"] = self._why(run)
        return tuple(cells[k] for k in keys)

    def _width_of(self, key: str) -> int:
        return next((w for c, w in self._layout if c.key == key), 0)

    def _vram(self, run: RunInfo) -> Text:
        """Estimate (with where it came from) over what was asked, in GiB: ``0.0c/19.5``."""
        app = self.app
        text = Text(justify="right")
        source = SOURCE_MARK.get(run.estimate_source or "", "?")
        text.append(gib(run.vram_estimate_mb, unit=False))
        if source and run.vram_estimate_mb is not None:
            text.append(source, style=theme_style(app, "accent", bold=True))
        asked = float(run.vram_asked_mb) if run.vram_asked_mb is not None else None
        text.append(f"/{gib(asked, unit=False)}", style=theme_style(app, "foreground-muted"))
        return text

    def _why(self, run: RunInfo) -> Text:
        app = self.app
        variable = "warning" if run.state is RunState.QUEUED and not run.file_error \
            else "error"
        text = Text(_why_text(run), style=theme_style(app, variable))
        text.no_wrap, text.overflow = True, "ellipsis"
        return text


def _why_text(run: RunInfo) -> str:
    """The reason column: why a run failed (or a file of it is bad), or why it waits."""
    if run.file_error or (run.state in FAILED and run.error):
        return first_line(run.error)
    if run.state is RunState.QUEUED:
        return run.waiting_reason or "waiting for the next tick"
    return ""


def _count(run: RunInfo) -> str:
    return f"{run.episodes_finished}/{run.episodes_total}"


def _data(run: RunInfo) -> str:
    return f"{_short(run.dataset)}/{run.split}"


def _short(dataset: str) -> str:
    """A dataset path shown by its file name; ``babyai`` as it is."""
    return Path(dataset).name if "/" in dataset else dataset
