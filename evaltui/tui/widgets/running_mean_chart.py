"""RunningMeanChart: SR, SPL and nDTW running means with their 95% CI bands.

x is episodes finished, in the order they finished; y is [0, 1]. The band shows how
far the mean could still move, so one can see a run settle (or not) before it ends.
"""

from __future__ import annotations

from rich.console import Group
from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.color import Color

from evaltui.runview.running_mean import RunningMeans
from evaltui.tui.widgets.bars import ThemedWidget, theme_colour, theme_style
from evaltui.tui.widgets.braille import band_line_plot
from evaltui.tui.widgets.metrics_panel import SHORT_NAMES, compact_interval

PLOTTED = (("success", "primary"), ("spl", "accent"), ("ndtw", "secondary"))
"""Metric and the theme variable it is drawn in."""
GUTTER = 2
BAND_ALPHA = 0.3


def band_style(app: App[object], variable: str) -> Style:
    """``variable``'s colour on a background shaded toward it: a CI band's cells."""
    fg = Color.from_rich_color(theme_colour(app, variable))
    bg = Color.from_rich_color(theme_colour(app, "background"))
    return Style(color=fg.rich_color, bgcolor=bg.blend(fg, BAND_ALPHA).rich_color)


class RunningMeanChart(ThemedWidget):
    """Small plots side by side, one per headline metric the episodes have; ``refresh()`` redraws
    them from the RunningMeans the screen keeps up to date."""

    DEFAULT_CSS = """
    RunningMeanChart {
        height: 1fr;
    }
    """

    def __init__(self, means: RunningMeans, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.means = means
        self._bands: dict[tuple[str, str], Style] = {}

    def _band(self, variable: str) -> Style:
        """The metric's colour on a background shaded toward it (cached per theme)."""
        key = (self.app.theme, variable)
        style = self._bands.get(key)
        if style is None:
            style = self._bands[key] = band_style(self.app, variable)
        return style

    def render(self) -> Group | Text:
        app = self.app
        muted = theme_style(app, "foreground-muted")
        if not len(self.means):
            return Text("running means appear with the first finished episodes", style=muted)
        # Only the metrics the run's episodes have: a benchmark without paths (Meta-World)
        # would get empty SPL and nDTW plots.
        plotted = [(n, v) for n, v in PLOTTED if self.means.has(n)] or list(PLOTTED)
        width, height = self.content_size.width, self.content_size.height
        each = max(8, (width - 2 * (len(plotted) - 1)) // len(plotted))
        plot_w, plot_h = each - GUTTER, max(1, height - 2)
        columns: list[list[Text]] = []
        for name, variable in plotted:
            series = self.means.series(name, 2 * plot_w)
            title = Text(f"{SHORT_NAMES[name]} ", style=theme_style(app, variable, bold=True))
            if len(series):
                title.append(f"{series.mean[-1]:.3f}", style=theme_style(app, "foreground",
                                                                         bold=True))
                ci = compact_interval([series.low[-1], series.high[-1]]) \
                    if series.counts[-1] > 1 else ""
                if len(title) + 1 + len(ci) <= each:  # narrow plots keep the mean whole
                    title.append(f" {ci}", style=muted)
            lines = band_line_plot(series.mean, series.low, series.high, plot_w, plot_h,
                                   theme_style(app, variable), self._band(variable))
            column = [title]
            for r, line in enumerate(lines or [Text()] * plot_h):
                label = "1" if r == 0 else "0" if r == plot_h - 1 else ""
                column.append(Text(label.ljust(GUTTER), style=muted) + line)
            last = int(series.counts[-1]) if len(series) else 0
            axis = Text(" " * GUTTER + "1", style=muted)
            axis.append(f"{last} ep".rjust(max(0, plot_w - 1)), style=muted)
            column.append(axis)
            columns.append(column)
        rows = []
        for parts in zip(*columns, strict=True):
            row = Text(no_wrap=True, overflow="crop")
            for k, part in enumerate(parts):
                part = part.copy()
                part.truncate(each, pad=True)
                row.append_text(part)
                if k < len(parts) - 1:
                    row.append("  ")
            rows.append(row)
        return Group(*rows)
