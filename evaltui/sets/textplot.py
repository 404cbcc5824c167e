"""Plain-text plots of a metric over checkpoint steps, for a terminal (no curses, no Rich).

:func:`line_plot` draws points ``(step, value)`` on a character grid: the y axis labelled
with the range, the x axis with the first and last step, one ``*`` per point (``o`` for
the best). :func:`metric_plots` makes one such plot per metric of a set whose members
have a ``step`` axis; members that differ in other axes too (a split) are plotted apart.
"""

from __future__ import annotations

from collections.abc import Sequence

from evaltui.sets.expansion import STEP_AXIS
from evaltui.sets.table import LOWER_IS_BETTER, SetTable

HEIGHT = 8
WIDTH = 60


def line_plot(points: Sequence[tuple[float, float]], *, title: str, height: int = HEIGHT,
              width: int = WIDTH, lower_is_better: bool = False) -> str:
    """The points as a text plot; ``title`` heads it."""
    if not points:
        return f"{title}: no points yet\n"
    pts = sorted(points)
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1 = xs[0], xs[-1]
    y0, y1 = min(ys), max(ys)
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    cols = min(width, max(len(pts) * 3, 10))
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
    lines.append(" " * (label_w + 2) + left + right.rjust(cols - len(left)))
    lines.append(" " * (label_w + 2) + "step".center(cols))
    return "\n".join(lines) + "\n"


def metric_plots(table: SetTable, metrics: Sequence[str] | None = None) -> list[str]:
    """One plot per metric (and per value of the other axes) over the steps; none when
    the set has no step axis."""
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
            plots.append(line_plot(pts, title=title, lower_is_better=name in LOWER_IS_BETTER))
    return plots
