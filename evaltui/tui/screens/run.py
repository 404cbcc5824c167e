"""RunScreen: one run live: metrics with CIs, progress, plots and the per-episode table.

The layout follows the terminal: below COMPACT_HEIGHT rows the metrics and progress
shrink to a line each and the plots are hidden, so 80x24 still shows a dozen episode
rows; ``m`` and ``p`` override either choice.

A RunWatcher thread follows the run dir (watchfiles) into a RunModel and posts a
coalescing RunChanged; the screen then drains only what changed, so a run finishing
100 episodes a second costs a handful of table updates a second, not a re-scan.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from evaltui.contract.states import RunState
from evaltui.nodesets.serverrecord import DIR as SERVER_DIR
from evaltui.nodesets.serverrecord import read_latency
from evaltui.results.groups import default_groups
from evaltui.results.stopnote import CS_TITLE, stopped_of
from evaltui.rundir.layout import episode_dir
from evaltui.runview.runmodel import RunModel
from evaltui.runview.running_mean import RunningMeans
from evaltui.runview.stopband import StopBand
from evaltui.runview.watcher import RunWatcher
from evaltui.tui.display import STATE_COLOUR, STATE_GLYPH, first_line
from evaltui.tui.messages import RunChanged
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.widgets.bars import theme_style
from evaltui.tui.widgets.episodes_table import COLUMNS, STATUS_FILTERS, EpisodesTable
from evaltui.tui.widgets.keys_footer import KeysFooter
from evaltui.tui.widgets.metrics_panel import MetricsPanel
from evaltui.tui.widgets.run_progress import Progress, RunProgress
from evaltui.tui.widgets.running_mean_chart import RunningMeanChart
from evaltui.tui.widgets.steps_histogram import StepsHistogram
from evaltui.tui.widgets.stop_band import StopBandView, band_line

WATCH_DEBOUNCE_MS = 400
"""While episodes stream in, the table updates at most this often (a lone episode shows
within ~0.1 s): at 100 episodes/s this keeps the TUI under a quarter of a core while the
p95 lag from episode.json to row stays near half a second (tests/benchmarks)."""
COMPACT_HEIGHT = 34
"""Below this many rows the metrics and progress take a line each and plots hide: the
boxed panels and plots need ~20 rows, which would leave a 24-row terminal 2 episodes."""


class RunScreen(Screen[None]):
    """Live view of one run dir."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_episode", "Replay"),
        Binding("slash", "filter", "Filter"),
        Binding("f", "status_filter", "Status"),
        Binding("o", "sort_next", "Sort"),
        Binding("r", "sort_reverse", "Reverse"),
        Binding("m", "toggle_metrics", "Metrics"),
        Binding("p", "toggle_plots", "Plots"),
        Binding("escape", "back", "Back"),
    ]
    CORE_KEYS: ClassVar[tuple[str, ...]] = (
        "back", "select_cursor", "open_episode", "filter", "status_filter", "sort_next",
        "toggle_metrics", "toggle_plots")
    """What the footer keeps at 80 columns, most important first (see KeysFooter)."""

    def __init__(self, run_dir: Path, *, standalone: bool = False,
                 debounce_ms: int = WATCH_DEBOUNCE_MS,
                 episodes_total: int | None = None) -> None:
        super().__init__()
        self.run_dir = Path(run_dir)
        self._latency_read: tuple[Any, dict[str, Any] | None] = (None, None)
        # A queued run has no summary.json yet; the queue knows its total from the spec.
        self.episodes_total = episodes_total
        self.standalone = standalone
        self.model = RunModel()
        self._watcher = RunWatcher(self.run_dir, self.model, self._changed,
                                   debounce_ms=debounce_ms)
        self._summary: dict[str, object] | None = None
        self._state: RunState | None = None
        self._errors: dict[str, str] = {}
        self._texts: dict[str, Text] = {}
        self.means = RunningMeans()
        self.metrics_open: bool | None = None
        """The user's choice (``m``) of the full metrics table; None: by terminal size."""
        self.plots_open: bool | None = None
        """The user's choice (``p``) of the plots; None: by terminal size."""
        self._was_compact: bool | None = None
        self.band: StopBand | None = None
        """The run's stop rule's confidence sequence, fed its rows (None: no rule)."""

    def compose(self) -> ComposeResult:
        yield Static(id="run-header")
        yield Static(id="run-error")  # wraps (the header is one cut line)
        with Horizontal(id="run-panels"):
            with Vertical(id="metrics-box", classes="box"):
                yield MetricsPanel()
            with Vertical(id="progress-box", classes="box"):
                yield RunProgress()
        yield Static(id="stop-line")  # the band's line where the plots are hidden
        with Horizontal(id="run-plots"):
            with Vertical(id="curves-box", classes="box"):
                yield RunningMeanChart(self.means)
            with Vertical(id="steps-box", classes="box"):
                yield StepsHistogram(self.means)
            with Vertical(id="band-box", classes="box"):
                yield StopBandView()
        yield Static(id="table-caption")
        yield EpisodesTable(id="episodes")
        yield Input(placeholder="filter: episode id, instruction, scene or error text",
                    id="filter")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#metrics-box").border_title = "metrics · mean, 95% CI, n"
        self.query_one("#progress-box").border_title = "progress"
        self.query_one("#curves-box").border_title = \
            "running mean, 95% CI band · x: episodes in order finished"
        self.query_one("#steps-box").border_title = "steps"
        self.band = StopBand.of_run(self.run_dir)
        self.query_one(StopBandView).band = self.band
        self.set_class(self.band is not None, "-stop-band")
        if self.band is not None:  # the band takes the steps' place
            self.query_one("#band-box").border_title = \
                f"stop rule {self.band.rule.text} · {CS_TITLE} band over n"
            self.query_one("#curves-box").border_title = "running mean, 95% CI band"
        self.query_one("#filter").display = False
        self._adapt()
        self._show_header()
        self._show_caption()
        self._watcher.start()

    def on_unmount(self) -> None:
        self._watcher.close()

    def on_resize(self) -> None:
        self._adapt()

    @property
    def compact(self) -> bool:
        return self.size.height < COMPACT_HEIGHT

    def _adapt(self) -> None:
        """Lay the panels out for the terminal's size and the user's ``m``/``p`` choices."""
        compact = self.compact
        if compact != self._was_compact:  # a choice made for one size does not carry over
            self.metrics_open = self.plots_open = None
            self._was_compact = compact
        self.set_class(compact, "-compact")
        self.query_one(MetricsPanel).collapsed = not (
            self.metrics_open if self.metrics_open is not None else not compact)
        self.query_one(RunProgress).compact = compact
        self.set_class(not (self.plots_open if self.plots_open is not None
                            else not compact), "-no-plots")

    def _changed(self) -> None:
        """Called in the watcher thread."""
        self.post_message(RunChanged())

    # --- updates -------------------------------------------------------------------------

    def on_run_changed(self, _: RunChanged) -> None:
        changes = self.model.take_changes()
        table = self.query_one(EpisodesTable)
        if changes.rows:
            table.upsert(changes.rows)
            self.means.update(changes.rows)
            if not self.has_class("-no-plots"):
                self.query_one(RunningMeanChart).refresh()
                self.query_one(StepsHistogram).refresh()
        if changes.status is not None:
            self._state = changes.status.state
            summary = dict(changes.status.summary or {})
            episodes = summary.pop("episodes", None)  # the table has them; header light
            self._summary = summary
            self.query_one(MetricsPanel).summary = summary
            self.query_one(MetricsPanel).groups = default_groups(summary, episodes)
        if self.band is not None:
            self._show_band(changes.rows)
        self._errors = changes.errors
        self._show_progress()
        self._show_header()
        self._show_caption()

    def _show_band(self, rows: list[dict[str, Any]]) -> None:
        assert self.band is not None
        self.band.add(rows)
        view = self.query_one(StopBandView)
        view.stopped = stopped_of(self._summary or {})
        if not self.has_class("-no-plots"):
            view.refresh()
        self._set_text("#stop-line", Text(f"rule {self.band.rule.text} · "
                                          + band_line(self.band, view.stopped),
                                          style=theme_style(self.app, "foreground")))

    def _show_progress(self) -> None:
        counts = self.query_one(EpisodesTable).counts()
        running = self._state in (RunState.RUNNING, RunState.STARTING)
        now: datetime = self.app.now()  # type: ignore[attr-defined]
        summary = self._summary
        if self.episodes_total and not (summary or {}).get("episodes_total"):
            summary = {**(summary or {}), "episodes_total": self.episodes_total}
        self.query_one(RunProgress).progress = Progress.of(summary, counts, running, now,
                                                           self._server_latency())

    def _server_latency(self) -> dict[str, Any] | None:
        """p50/p99 of a remote policy's round trips, read again only when its files
        change (each worker rewrites its own at every episode's start)."""
        files = sorted((self.run_dir / SERVER_DIR).glob("latency-*.json"))
        try:
            key = tuple((f.name, f.stat().st_mtime_ns) for f in files)
        except OSError:  # a worker replaced its file meanwhile: next time
            return self._latency_read[1]
        if key != self._latency_read[0]:
            self._latency_read = (key, read_latency(self.run_dir) if files else None)
        return self._latency_read[1]

    def _show_header(self) -> None:
        app = self.app
        summary = self._summary or {}
        header = Text()
        header.append(f"run {self.run_dir.name}", style=theme_style(app, "primary", bold=True))
        if summary.get("graph_name"):
            header.append(f"  {summary['graph_name']}", style=theme_style(app, "foreground",
                                                                          bold=True))
        if summary.get("dataset"):
            header.append(f"  {summary['dataset']}/{summary.get('split', '-')}")
        workers = summary.get("worker_count")
        if workers:
            header.append(f"  {workers} worker{'s' if workers != 1 else ''}",
                          style=theme_style(app, "foreground-muted"))
        if self._state is not None:
            header.append(f"  {STATE_GLYPH[self._state]} {self._state.value}",
                          style=theme_style(app, STATE_COLOUR[self._state], bold=True))
        for message in self._errors.values():
            header.append(f"\n⚠ {message}", style=theme_style(app, "error", bold=True))
        self._set_text("#run-header", header)
        error = first_line(summary.get("error"), 400)  # a traceback's cause, not its frames
        self.query_one("#run-error").display = bool(error)
        if error:
            self._set_text("#run-error", Text(f"✘ {error}", style=theme_style(app, "error",
                                                                              bold=True)))

    def _show_caption(self) -> None:
        table = self.query_one(EpisodesTable)
        column = next(c for c in COLUMNS if c.key == table.sort_column)
        arrow = "↓" if table.sort_reverse else "↑"
        caption = Text(f"episodes {table.row_count}/{table.total} shown",
                       style=theme_style(self.app, "foreground", bold=True))
        caption.append(f"   status: {table.status_filter}   sort: {column.label} {arrow}",
                       style=theme_style(self.app, "foreground-muted"))
        if table.text_filter:
            caption.append(f"   text: “{table.text_filter}”", style=theme_style(self.app,
                                                                               "accent"))
        self._set_text("#table-caption", caption)

    def _set_text(self, selector: str, text: Text) -> None:
        """Update a Static only when its text changed, and re-lay out only when its height
        did: at 100 episodes a second, needless layouts cost more than the table."""
        previous = self._texts.get(selector)
        if previous is not None and previous == text:
            return
        self._texts[selector] = text
        lines = text.plain.count("\n")
        self.query_one(selector, Static).update(
            text, layout=previous is None or previous.plain.count("\n") != lines)

    # --- actions -------------------------------------------------------------------------

    def action_toggle_metrics(self) -> None:
        self.metrics_open = self.query_one(MetricsPanel).collapsed
        self._adapt()

    def action_toggle_plots(self) -> None:
        self.plots_open = self.has_class("-no-plots")
        self._adapt()
        if self.plots_open:
            self.query_one(RunningMeanChart).refresh()
            self.query_one(StepsHistogram).refresh()
            self.query_one(StopBandView).refresh()

    def action_open_episode(self) -> None:
        table = self.query_one(EpisodesTable)
        if not table.cursor_on_screen():  # never open a row the user cannot see
            return
        index = table.selected_index()
        if index is not None:
            self.app.push_screen(ReplayScreen(episode_dir(self.run_dir, index)))

    @on(DataTable.RowSelected, "#episodes")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_episode()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_one(EpisodesTable).set_filter(text=event.value)
        self._show_caption()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, _: Input.Submitted) -> None:
        self.query_one(EpisodesTable).focus()

    def action_status_filter(self) -> None:
        table = self.query_one(EpisodesTable)
        position = STATUS_FILTERS.index(table.status_filter)
        table.set_filter(status=STATUS_FILTERS[(position + 1) % len(STATUS_FILTERS)])
        self._show_caption()

    def action_sort_next(self) -> None:
        table = self.query_one(EpisodesTable)
        keys = [c.key for c in COLUMNS]
        table.sort_by(keys[(keys.index(table.sort_column) + 1) % len(keys)], reverse=False)
        self._show_caption()

    def action_sort_reverse(self) -> None:
        table = self.query_one(EpisodesTable)
        table.sort_by(table.sort_column, reverse=not table.sort_reverse)
        self._show_caption()

    def action_back(self) -> None:
        box = self.query_one("#filter", Input)
        if box.has_focus:  # first escape leaves the filter box, keeping the filter
            if not box.value:
                box.display = False
            self.query_one(EpisodesTable).focus()
            return
        if self.standalone:
            self.app.exit()
        else:
            self.dismiss()
