"""StopBandView: a run's stop rule and its confidence sequence narrowing as episodes finish.

One line says where the rule stands (the 95 % CS now, its width against the rule's
target, or the threshold question's answer; "stopped at n=..." once the run stopped);
under it a braille plot of the band over n (x: episodes of the dealing order, y: [0, 1])
with the running mean as its line. The numbers come from
:class:`~evaltui.runview.stopband.StopBand`, the run's own computation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group
from rich.text import Text
from textual.widget import Widget

from evaltui.results.stopnote import CS_TITLE
from evaltui.runview.stopband import StopBand
from evaltui.tui.widgets.bars import theme_style
from evaltui.tui.widgets.braille import band_line_plot
from evaltui.tui.widgets.metrics_panel import SHORT_NAMES, compact_interval, short_number
from evaltui.tui.widgets.running_mean_chart import band_style

GUTTER = 2


def band_line(band: StopBand, stopped: Mapping[str, Any] | None) -> str:
    """Where the rule stands, in one line (the compact screen's, the plot's title)."""
    state = band.state()
    name = SHORT_NAMES.get(state.metric, state.metric)
    if stopped is not None:  # the run's own word
        met = stopped.get("met_at")
        return (f"stopped at n={stopped.get('n')} of {stopped.get('full_n')}"
                + (f" (met at {met})" if met is not None and met != stopped.get("n") else "")
                + f" · {name} {CS_TITLE} {compact_interval(stopped.get('interval'))}"
                + (f" · {stopped['decision']}" if stopped.get("decision") else ""))
    if state.n == 0:
        return f"{band.rule.text}: the {CS_TITLE} starts with the first episode of the order"
    lo, hi = state.interval
    line = f"{name} {CS_TITLE} {compact_interval([lo, hi])} n={state.n}/{state.full_n}"
    target = band.target_width
    if target is not None:
        line += f" · width {short_number(hi - lo)} → ≤{short_number(target)}"
    if state.decision:
        line += f" · {state.decision}"
    elif any(c.width is None for c in band.rule.clauses):
        line += " · undecided"
    if state.met_at is not None:
        line += f" · rule met at n={state.met_at}"
    return line


class StopBandView(Widget):
    """The band of the screen's run; the screen sets ``band``/``stopped`` and refreshes."""

    DEFAULT_CSS = """
    StopBandView {
        height: 1fr;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.band: StopBand | None = None
        self.stopped: Mapping[str, Any] | None = None

    def render(self) -> Group | Text:
        app = self.app
        muted = theme_style(app, "foreground-muted")
        if self.band is None:
            return Text("no stop rule", style=muted)
        title = Text(band_line(self.band, self.stopped), no_wrap=True, overflow="ellipsis",
                     style=theme_style(app, "foreground", bold=True))
        history = self.band.history
        width, height = self.content_size.width, self.content_size.height
        plot_w, plot_h = max(1, width - GUTTER), max(1, height - 2)
        if not history or height < 3:
            return title
        _, means, lows, highs = zip(*history, strict=True)
        lines = band_line_plot(means, lows, highs, plot_w, plot_h,
                               theme_style(app, "primary"), band_style(app, "primary"))
        rows = [title]
        for r, line in enumerate(lines):
            label = "1" if r == 0 else "0" if r == plot_h - 1 else ""
            rows.append(Text(label.ljust(GUTTER), style=muted) + line)
        axis = Text(" " * GUTTER + "1", style=muted)
        axis.append(f"n={history[-1][0]}".rjust(max(0, plot_w - 1)), style=muted)
        rows.append(axis)
        return Group(*rows)
