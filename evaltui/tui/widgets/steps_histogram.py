"""StepsHistogram: how many steps the run's finished episodes took."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from evaltui.runview.running_mean import RunningMeans
from evaltui.tui.widgets.bars import ThemedWidget, theme_style
from evaltui.tui.widgets.braille import column_plot


def bin_counts(values: list[int], bins: int) -> tuple[list[int], int, int]:
    """Counts of ``values`` in at most ``bins`` equal integer-width bins from min to max;
    returns (counts, low, bin width)."""
    low, high = min(values), max(values)
    span = high - low + 1
    size = -(-span // max(1, bins))  # ceil: whole steps per bin
    counts = [0] * (-(-span // size))
    for v in values:
        counts[(v - low) // size] += 1
    return counts, low, size


class StepsHistogram(ThemedWidget):
    """Episodes by step count, one column per bin; ``refresh()`` redraws from the
    RunningMeans the screen keeps up to date."""

    DEFAULT_CSS = """
    StepsHistogram {
        height: 1fr;
    }
    """

    def __init__(self, means: RunningMeans, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.means = means

    def render(self) -> Group | Text:
        app = self.app
        muted = theme_style(app, "foreground-muted")
        steps = self.means.steps()
        if not steps:
            return Text("steps histogram: no finished episode yet", style=muted)
        width, height = self.content_size.width, self.content_size.height
        counts, low, size = bin_counts(steps, max(1, width))
        high = low + size * len(counts) - 1
        title = Text("steps ", style=theme_style(app, "primary", bold=True))
        ordered = sorted(steps)
        title.append(f"median {ordered[len(ordered) // 2]}  max {ordered[-1]}", style=muted)
        title.no_wrap, title.overflow = True, "ellipsis"
        # Bars as wide as the panel allows: few bins read better wide than as slivers.
        repeat = max(1, width // len(counts))
        values = [c for c in counts for _ in range(repeat)]
        bars = column_plot(values, max(1, height - 2), theme_style(app, "primary"))
        axis = Text(str(low), style=muted)
        axis.append(str(high).rjust(max(0, len(values) - len(str(low)))), style=muted)
        return Group(title, *bars, axis)
