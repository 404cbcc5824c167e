"""SetPlot: one metric over a set's checkpoint steps, drawn at the size of its box.

The text plot (:func:`evaltui.sets.textplot.line_plot`) is drawn again at each size, its
area exactly the box's inside: a box of 38 columns holds twelve checkpoints without a
wrapped line, and a short terminal gets a shorter plot rather than a table of one row.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.widget import Widget

from evaltui.sets.textplot import PlotSeries, label_width, line_plot

FRAME_ROWS = 3
"""Lines of a plot beside its area: the title, the x axis, the ticks with the axis name."""
MIN_ROWS = 2


class SetPlot(Widget):
    """A set's metric over the steps, filling the widget."""

    DEFAULT_CSS: ClassVar[str] = """
    SetPlot {
        width: 1fr;
        height: 1fr;
        padding: 0 1;
        border: round $panel-lighten-1;
    }
    """

    def __init__(self, series: PlotSeries, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.series = series

    def render(self) -> Text:
        size = self.content_region.size
        rows = max(size.height - FRAME_ROWS, MIN_ROWS)
        cols = max(size.width - label_width(self.series) - 2, 4)
        text = line_plot(self.series.points, title=self.series.title, height=rows,
                         width=cols, lower_is_better=self.series.lower_is_better, fill=True)
        return Text(text.rstrip("\n"), no_wrap=True, overflow="crop")
