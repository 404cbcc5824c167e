"""CompareScreen: run B against run A, episode by episode (``evaltui compare`` in the TUI).

Both run dirs are read and compared in a thread worker (:mod:`evaltui.results.runrows`,
:mod:`evaltui.results.compare`: a paired bootstrap over 10,000 resamples takes a moment
on big runs). The screen shows per metric mean A, mean B, B − A with its 95% CI and n,
McNemar's exact test on success, and the episodes whose success flipped; ``a`` or ``b``
(or ``enter``, for the run last chosen) opens that run's replay of the flipped episode.
Differing episode sets are said plainly, with ``i`` to compare the shared ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from evaltui.contract.views import data_label
from evaltui.results.compare import CompareError, Comparison, EpisodeSetMismatch, compare_rows
from evaltui.results.runrows import RunDirError, RunRows, load_run
from evaltui.rundir.layout import episode_dir
from evaltui.tui.messages import CompareDone
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.widgets.bars import theme_style
from evaltui.tui.widgets.keys_footer import KeysFooter
from evaltui.tui.widgets.row_table import RowTable

Side = Literal["a", "b"]


def run_label(run: RunRows) -> str:
    """``RUN_ID graph on dataset/split`` (what is known of it)."""
    what = f" {run.graph_name}" if run.graph_name else ""
    where = f" on {data_label(run.dataset, run.split)}" if run.dataset else ""
    return f"{run.run_id}{what}{where}"


class CompareScreen(Screen[None]):
    """Paired comparison of two run dirs (B against A)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "replay", "Replay"),
        Binding("a", "replay('a')", "Replay in A"),
        Binding("b", "replay('b')", "Replay in B"),
        Binding("i", "intersect", "Intersect"),
        Binding("escape", "back", "Back"),
    ]
    CORE_KEYS: ClassVar[tuple[str, ...]] = ("back", "select_cursor", "replay", "intersect",
                                            "replay('a')", "replay('b')")
    """What the footer keeps at 80 columns, most important first (see KeysFooter)."""

    def __init__(self, run_a: Path, run_b: Path, *, intersect: bool = False) -> None:
        super().__init__()
        self.run_dirs = (Path(run_a), Path(run_b))
        self.intersect = intersect
        self.result: Comparison | None = None
        self.mismatch = False
        self.side: Side = "b"
        """The run ``enter`` opens a replay in (the last one chosen with a or b)."""
        self._rows: dict[str, dict[str, Any]] = {}

    def compose(self) -> ComposeResult:
        yield Static("reading both runs…", id="compare-header")
        yield DataTable(id="compare-metrics", cursor_type="none", zebra_stripes=True)
        yield Static(id="compare-test")
        yield RowTable(id="compare-flips", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        metrics = self.query_one("#compare-metrics", DataTable)
        for label in ("metric", "mean A", "mean B", "B − A", "95% CI of B − A", "n"):
            metrics.add_column(label, key=label)
        flips = self.query_one("#compare-flips", DataTable)
        for label, key in (("flip", "flip"), ("episode", "episode"), ("ep A", "ep_a"),
                           ("ep B", "ep_b"), ("instruction", "instruction")):
            flips.add_column(label, key=key)
        flips.display = False
        metrics.display = False
        self.compute()

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def compute(self) -> None:
        """Read both runs and compare them (thread), then post CompareDone."""
        try:
            run_a, run_b = (load_run(d) for d in self.run_dirs)
        except RunDirError as exc:
            self.post_message(CompareDone(None, ("", ""), error=str(exc)))
            return
        headers = (run_label(run_a), run_label(run_b))
        # Each episode's row, A's where both runs have one.
        rows = {str(r.get("episode_id")): r for r in [*run_b.rows, *run_a.rows]}
        try:
            result = compare_rows(run_a.rows, run_b.rows, intersect=self.intersect)
        except EpisodeSetMismatch as exc:
            # Nothing to intersect: say so instead of offering it.
            why = f"{exc}. Press i to compare the {exc.shared} shared episodes." \
                if exc.shared else f"{exc}: these runs ran different episodes, so there is " \
                "nothing to compare pair by pair."
            self.post_message(CompareDone(None, headers, error=why, mismatch=bool(exc.shared),
                                          rows=rows))
            return
        except CompareError as exc:
            self.post_message(CompareDone(None, headers, error=str(exc), rows=rows))
            return
        self.post_message(CompareDone(result, headers, rows=rows))

    def on_compare_done(self, message: CompareDone) -> None:
        self.result = message.result
        self.mismatch = message.mismatch
        self._rows = message.rows or {}
        self._show_header(message.headers)
        test = self.query_one("#compare-test", Static)
        if message.error is not None:
            test.update(Text(message.error, style=theme_style(self.app, "warning")))
        elif message.result is not None:
            self._show_metrics(message.result)
            test.update(self._test_text(message.result))
            self._show_flips(message.result)
        self.refresh_bindings()

    def _show_header(self, headers: tuple[str, str]) -> None:
        app = self.app
        header = Text(no_wrap=True, overflow="ellipsis")
        for side, label in zip("AB", headers, strict=True):
            header.append(f"{side} ", style=theme_style(app, "background", bold=True,
                                                        background="accent"))
            header.append(f" {label or '?'}\n", style=theme_style(app, "foreground"))
        header.rstrip()
        self.query_one("#compare-header", Static).update(header)

    def _show_metrics(self, result: Comparison) -> None:
        app = self.app
        table = self.query_one("#compare-metrics", DataTable)
        table.clear()
        table.display = True
        for m in result.metrics:
            shifted = m.ci95 is not None and not m.ci95[0] <= 0 <= m.ci95[1]
            style = theme_style(app, "success" if m.diff > 0 else "error", bold=True) \
                if shifted else theme_style(app, "foreground")
            ci = f"[{m.ci95[0]:+.3f}, {m.ci95[1]:+.3f}]" if m.ci95 else "—"
            table.add_row(m.name, Text(f"{m.mean_a:.3f}", justify="right"),
                          Text(f"{m.mean_b:.3f}", justify="right"),
                          Text(f"{m.diff:+.3f}", style=style, justify="right"),
                          Text(ci, justify="right"), Text(str(m.n), justify="right"))

    def _test_text(self, result: Comparison) -> Text:
        app = self.app
        muted = theme_style(app, "foreground-muted")
        text = Text(f"{result.n_pairs} episode pairs", style=theme_style(app, "foreground",
                                                                         bold=True))
        if result.dropped_a or result.dropped_b:
            text.append(f" (intersected: left out {len(result.dropped_a)} only in A, "
                        f"{len(result.dropped_b)} only in B)", style=theme_style(app, "warning"))
        test = result.mcnemar
        if test is None:
            text.append(" · McNemar: no success metric in both runs", style=muted)
        else:
            text.append(f" · McNemar exact p = {test.p_value:.4g}",
                        style=theme_style(app, "foreground", bold=True))
            text.append(f" (A✔ B✘ {test.b}, A✘ B✔ {test.c})", style=muted)
        text.append(f"\nCI: paired bootstrap, {result.resamples:,} resamples, seed "
                    f"{result.seed}", style=muted)
        return text

    def _show_flips(self, result: Comparison) -> None:
        app = self.app
        table = self.query_one("#compare-flips", DataTable)
        table.clear()
        for flips, label, colour in ((result.lost, "A✔ → B✘", "error"),
                                     (result.gained, "A✘ → B✔", "success")):
            for flip in flips:
                row = self._rows.get(flip.episode_id, {})
                table.add_row(Text(label, style=theme_style(app, colour)), flip.episode_id,
                              _index(flip.index_a), _index(flip.index_b),
                              Text(str(row.get("instruction") or ""), no_wrap=True,
                                   overflow="ellipsis"),
                              key=flip.episode_id)
        table.display = bool(table.row_count)
        if table.row_count:
            table.border_title = f"flipped episodes ({table.row_count}) — a/b: replay in A/B"
            table.focus()

    # --- actions -------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "intersect":
            return self.mismatch
        if action == "replay":
            return self.result is not None and bool(self.result.lost or self.result.gained)
        return True

    def action_intersect(self) -> None:
        self.intersect, self.mismatch = True, False
        self.query_one("#compare-test", Static).update("comparing the shared episodes…")
        self.refresh_bindings()
        self.compute()

    def action_replay(self, side: Side | None = None) -> None:
        """Open run A's or B's replay of the flipped episode under the cursor."""
        self.side = side or self.side
        table = self.query_one("#compare-flips", DataTable)
        if self.result is None or not table.row_count:
            return
        episode_id = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        flip = next(f for f in self.result.lost + self.result.gained
                    if f.episode_id == episode_id)
        index = flip.index_a if self.side == "a" else flip.index_b
        run_dir = self.run_dirs[0 if self.side == "a" else 1]
        if index is None:
            self.notify(f"{episode_id} has no episode index in run {self.side.upper()}",
                        severity="warning")
            return
        ep_dir = episode_dir(run_dir, index)
        if not ep_dir.is_dir():
            self.notify(f"{ep_dir} is not there (a copied summary without its ep dirs?)",
                        severity="warning", timeout=6)
            return
        self.app.push_screen(ReplayScreen(ep_dir))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_replay()

    def action_back(self) -> None:
        self.dismiss()


def _index(value: int | None) -> Text:
    return Text("—" if value is None else str(value), justify="right")
