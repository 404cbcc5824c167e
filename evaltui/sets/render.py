"""The set table as text: Markdown, LaTeX (booktabs), CSV, or a Rich table for the terminal.

Cells show ``mean [lo, hi]`` with the member's n in its own column (a metric averaged
over fewer episodes, like ``path_length`` without its errored episodes, shows its own n
in the cell); the best mean per metric is bold (``**`` in Markdown, ``\\textbf`` in
LaTeX). CSV has plain numbers, one column each for mean, CI bounds and n, and no marks.
``pivot`` spreads one axis over the columns: a row per value of the other axes.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any, Literal

from evaltui.sets.table import MemberRow, SetTable

TextFormat = Literal["md", "latex", "csv"]
MISSING = "-"
TERMINAL_METRICS = ("success", "spl")
"""What the terminal table shows unless ``--metrics`` says otherwise (it must fit)."""


@dataclass
class Grid:
    """Headers, rows of cell texts, the cells to mark bold, notes under the table."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    bold: set[tuple[int, int]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


def render(table: SetTable, fmt: TextFormat, *, metrics: list[str] | None = None,
           pivot: str | None = None, digits: int = 3) -> str:
    """The table in ``fmt``; :func:`rich_table` is the one for a terminal."""
    shown = [m for m in (metrics or table.metrics) if m in table.metrics] or table.metrics
    if pivot is not None:
        _check_pivot(table, pivot)
    if fmt == "csv":
        return _csv(table, shown)  # long format, a row per member, whatever the pivot
    grid = pivot_grid(table, shown, pivot, digits) if pivot else member_grid(table, shown,
                                                                             digits)
    if fmt == "md":
        return _markdown(grid)
    return _latex(grid)


def member_grid(table: SetTable, metrics: list[str], digits: int) -> Grid:
    grid = Grid([*table.axes, "state", *metrics, "n"])
    base = table.baseline
    if base is not None:
        grid.headers += [f"Δ {m} [95% CI]" for m in metrics] + ["McNemar p", "p (Holm)"]
        grid.notes.append(f"Δ = member - baseline ({_axes(base.axes)}), paired over shared "
                          "episodes; 95% CI: paired bootstrap, 10000 resamples; p: exact "
                          f"McNemar on success, Holm-corrected across "
                          f"{sum(1 for r in table.rows if r.vs_baseline)} members")
    for i, r in enumerate(table.rows):
        n = _row_n(r, metrics)
        cells = [_value(r.axes.get(a)) for a in table.axes] + [_state(r)]
        for j, m in enumerate(metrics):
            cells.append(_cell(r, m, digits, n))
            if r.key in table.best.get(m, ()):
                grid.bold.add((i, len(table.axes) + 1 + j))
        cells.append(str(n) if n is not None else MISSING)
        if base is not None:
            cells += _baseline_cells(r, base, metrics, digits)
        grid.rows.append(cells)
    grid.notes.append("bold: the best mean per metric; errors count as failures")
    return grid


def _check_pivot(table: SetTable, pivot: str) -> None:
    if pivot not in table.axes:
        raise ValueError(f"--pivot {pivot}: the set has no axis {pivot!r} (axes: "
                         f"{', '.join(table.axes)})")


def pivot_grid(table: SetTable, metrics: list[str], pivot: str, digits: int) -> Grid:
    _check_pivot(table, pivot)
    others = [a for a in table.axes if a != pivot]
    values: list[Any] = []
    groups: dict[tuple, dict[Any, MemberRow]] = {}
    for r in table.rows:
        v = r.axes.get(pivot)
        if v not in values:
            values.append(v)
        groups.setdefault(tuple(_value(r.axes.get(a)) for a in others), {})[_value(v)] = r
    grid = Grid(others + [f"{m} ({pivot}={_value(v)})" for v in values for m in metrics])
    for i, (head, by_value) in enumerate(groups.items()):
        cells = list(head)
        for v in values:
            for m in metrics:
                r = by_value.get(_value(v))
                cells.append(_cell(r, m, digits, None, with_n=True) if r else MISSING)
                if r is not None and r.key in table.best.get(m, ()):
                    grid.bold.add((i, len(cells) - 1))
        grid.rows.append(cells)
    grid.notes.append("cells: mean [95% CI] (n); bold: the best mean per metric over the set")
    return grid


def _row_n(r: MemberRow, metrics: list[str]) -> int | None:
    for m in ("success", *metrics):
        if m in r.metrics_n:
            return r.metrics_n[m]
    return None


def _cell(r: MemberRow, metric: str, digits: int, row_n: int | None,
          with_n: bool = False) -> str:
    if metric not in r.metrics:
        return MISSING
    text = f"{r.metrics[metric]:.{digits}f}"
    ci = r.metrics_ci95.get(metric)
    if isinstance(ci, list | tuple) and len(ci) == 2:
        text += f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    n = r.metrics_n.get(metric)
    if n is not None and (with_n or n != row_n):
        text += f" (n={n})"
    return text


def _baseline_cells(r: MemberRow, base: MemberRow, metrics: list[str], digits: int
                    ) -> list[str]:
    if r is base:
        return ["baseline"] + [""] * (len(metrics) + 1)
    d = r.vs_baseline
    if d is None:
        return [MISSING] * (len(metrics) + 2)
    cells = []
    for m in metrics:
        diff = d.metrics.get(m)
        if diff is None:
            cells.append(MISSING)
            continue
        ci = f" [{diff.ci95[0]:+.{digits}f}, {diff.ci95[1]:+.{digits}f}]" if diff.ci95 else ""
        cells.append(f"{diff.diff:+.{digits}f}{ci}")
    cells.append(_p(d.mcnemar_p))
    cells.append(_p(d.mcnemar_p_holm))
    return cells


def _p(p: float | None) -> str:
    return f"{p:.3g}" if p is not None else MISSING


def _state(r: MemberRow) -> str:
    return r.state if r.attempts <= 1 else f"{r.state} ({r.attempts} attempts)"


def _value(v: Any) -> str:
    return MISSING if v is None else str(v)


def _axes(axes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in axes.items())


def _markdown(grid: Grid) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [line(grid.headers), "|" + "|".join("---" for _ in grid.headers) + "|"]
    for i, row in enumerate(grid.rows):
        out.append(line([f"**{c}**" if (i, j) in grid.bold else c for j, c in enumerate(row)]))
    out += [""] + [f"_{n}_" for n in grid.notes]
    return "\n".join(out) + "\n"


def _latex(grid: Grid) -> str:
    from evaltui.results.tables import latex_escape  # with numpy: only for LaTeX

    cols = "l" * len(grid.headers)
    out = [f"\\begin{{tabular}}{{{cols}}}", "\\toprule",
           " & ".join(latex_escape(h) for h in grid.headers) + " \\\\", "\\midrule"]
    for i, row in enumerate(grid.rows):
        cells = [f"\\textbf{{{latex_escape(c)}}}" if (i, j) in grid.bold else latex_escape(c)
                 for j, c in enumerate(row)]
        out.append(" & ".join(cells) + " \\\\")
    out += ["\\bottomrule", "\\end{tabular}"] + [f"% {n}" for n in grid.notes]
    return "\n".join(out) + "\n"


def rich_table(table: SetTable, *, metrics: list[str] | None = None, pivot: str | None = None,
               digits: int = 3) -> Any:
    """The table as a :class:`rich.table.Table` (bold best cells, notes as its caption)."""
    from rich.table import Table

    default = [m for m in TERMINAL_METRICS if m in table.metrics] or table.metrics
    shown = [m for m in (metrics or default) if m in table.metrics] or default
    grid = pivot_grid(table, shown, pivot, digits) if pivot else member_grid(table, shown,
                                                                             digits)
    out = Table(title=f"set {table.set_id}", caption="\n".join(grid.notes))
    for h in grid.headers:
        out.add_column(h)
    for i, row in enumerate(grid.rows):
        out.add_row(*[f"[bold]{c}[/]" if (i, j) in grid.bold else c for j, c in enumerate(row)])
    return out


def _csv(table: SetTable, metrics: list[str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header = [*table.axes, "state", "run_id"]
    for m in metrics:
        header += [f"{m}_mean", f"{m}_ci_lo", f"{m}_ci_hi", f"{m}_n"]
    if table.baseline is not None:
        for m in metrics:
            header += [f"{m}_diff", f"{m}_diff_ci_lo", f"{m}_diff_ci_hi"]
        header += ["mcnemar_p", "mcnemar_p_holm"]
    writer.writerow(header)
    for r in table.rows:
        row: list[Any] = [r.axes.get(a, "") for a in table.axes] + [r.state, r.run_id or ""]
        for m in metrics:
            ci = r.metrics_ci95.get(m) or [None, None]
            row += [r.metrics.get(m, ""), _blank(ci[0]), _blank(ci[1]), r.metrics_n.get(m, "")]
        if table.baseline is not None:
            d = r.vs_baseline
            for m in metrics:
                diff = d.metrics.get(m) if d else None
                lo, hi = (diff.ci95 if diff and diff.ci95 else (None, None))
                row += [diff.diff if diff else "", _blank(lo), _blank(hi)]
            row += [_blank(d.mcnemar_p if d else None), _blank(d.mcnemar_p_holm if d else None)]
        writer.writerow(row)
    return buf.getvalue()


def _blank(v: Any) -> Any:
    return "" if v is None else v
