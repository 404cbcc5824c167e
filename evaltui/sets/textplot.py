"""Plain-text plots of a metric over checkpoint steps, for a terminal (no curses, no Rich).

:func:`line_plot` draws points ``(step, value)`` on a character grid: the y axis labelled
with the range, the x axis with the first and last step, one ``*`` per point (``o`` for
the best). :func:`metric_plots` makes one such plot per metric of a set whose members
have a ``step`` axis; members that differ in other axes too (a split) are plotted apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evaltui.sets.expansion import STEP_AXIS
from evaltui.sets.table import LOWER_IS_BETTER, SetTable

HEIGHT = 8
WIDTH = 60


@dataclass(frozen=True)
class PlotSeries:
    """What one plot shows: its title, its points and which way is better."""

    title: str
    points: list[tuple[float, float]]
    lower_is_better: bool = False


def line_plot(points: Sequence[tuple[float, float]], *, title: str, height: int = HEIGHT,
              width: int = WIDTH, lower_is_better: bool = False, fill: bool = False) -> str:
    """The points as a text plot; ``title`` heads it. ``fill``: the plot area is ``width``
    columns whatever the number of points (a box of that size holds it, no line wraps)."""
    if not points:
        return f"{title}: no points yet\n"
    pts = sorted(points)
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1 = xs[0], xs[-1]
    y0, y1 = min(ys), max(ys)
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    cols = max(width, 4) if fill else min(width, max(len(pts) * 3, 10))
    grid = [[" "] * cols for _ in range(height)]
    best = (min if lower_is_better else max)(ys)
    for x, y in pts:
        col = 0 if x1 == x0 else round((x - x0) / (x1 - x0) * (cols - 1))
        row = height - 1 - round((y - y0) / (y1 - y0) * (height - 1))
        grid[row][col] = "o" if y == best else "*"
    label_w = max(len(f"{y1:.3f}"), len(f"{y0:.3f}"))
    lines = [title]
    for r, row in enumerate(grid):
        label = f"{y1:.3f}" if r == 0 else f"{y0:.3f}" if r == height - 1 else ""
        lines.append(f"{label:>{label_w}} |{''.join(row)}")
    lines.append(" " * label_w + " +" + "-" * cols)
    left, right = f"{x0:g}", f"{x1:g}"
    if fill:  # one line for the ticks and the axis name: a small box keeps its rows
        middle = "step".center(max(cols - len(left) - len(right), 0))
        lines.append(" " * (label_w + 2) + (left + middle + right)[:cols])
    else:
        lines.append(" " * (label_w + 2) + left + right.rjust(cols - len(left)))
        lines.append(" " * (label_w + 2) + "step".center(cols))
    return "\n".join(lines) + "\n"


def label_width(series: PlotSeries) -> int:
    """Columns the y labels of ``series``'s plot take (its axis and a space follow)."""
    ys = [y for _, y in series.points] or [0.0]
    lo, hi = min(ys), max(ys)
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return max(len(f"{hi:.3f}"), len(f"{lo:.3f}"))


def metric_plots(table: SetTable, metrics: Sequence[str] | None = None) -> list[str]:
    """One plot per metric (and per value of the other axes) over the steps; none when
    the set has no step axis."""
    return [line_plot(s.points, title=s.title, lower_is_better=s.lower_is_better)
            for s in plot_series(table, metrics)]


def plot_series(table: SetTable, metrics: Sequence[str] | None = None) -> list[PlotSeries]:
    """What :func:`metric_plots` draws, for a caller that sizes each plot itself."""
    if STEP_AXIS not in table.axes:
        return []
    others = [a for a in table.axes if a not in (STEP_AXIS, "checkpoint")]
    groups: dict[tuple, list] = {}
    for r in table.rows:
        if isinstance(r.axes.get(STEP_AXIS), int):
            groups.setdefault(tuple(r.axes.get(a) for a in others), []).append(r)
    plots = []
    for name in [m for m in (metrics or table.metrics) if m in table.metrics]:
        for head, rows in groups.items():
            pts = [(float(r.axes[STEP_AXIS]), r.metrics[name]) for r in rows if name in r.metrics]
            where = ", ".join(f"{a}={v}" for a, v in zip(others, head, strict=True))
            title = f"{name} over steps" + (f" ({where})" if where else "")
            plots.append(PlotSeries(title, pts, name in LOWER_IS_BETTER))
    return plots
