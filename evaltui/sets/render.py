"""The set table as text: Markdown, LaTeX (booktabs), CSV, or a Rich table for the terminal.

Cells show ``mean [lo, hi]`` with the member's n in its own column (a metric averaged
over fewer episodes, like ``path_length`` without its errored episodes, shows its own n
in the cell); the best mean per metric is bold (``**`` in Markdown, ``\\textbf`` in
LaTeX). CSV has plain numbers, one column each for mean, CI bounds and n, and no marks.
``pivot`` spreads one axis over the columns: a row per value of the other axes.
"""

from __future__ import annotations

from typing import Any, Literal

from evaltui.contract.setspec import RaceStanding
from evaltui.results.tablewriter import Grid, csv_text, fit_grid, latex, markdown, rich_grid
from evaltui.sets.table import MemberRow, SetTable

TextFormat = Literal["md", "latex", "csv"]
MISSING = "-"
TERMINAL_METRICS = ("success", "spl")
"""What the TUI's set screen tables and plots (it must fit 80 columns)."""


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
        return markdown(grid, italic_notes=True)
    if pivot or table.baseline is None:
        return latex(grid)
    # One table of means and one of differences: side by side they made a table of
    # 20-odd columns no page holds.
    return latex(compact_grid(table, member_grid(table, shown, digits, baseline=False))) \
        + "\n" + latex(baseline_grid(table, shown, digits))


def baseline_grid(table: SetTable, metrics: list[str], digits: int) -> Grid:
    """Each member's paired difference to the baseline (a table of its own, for LaTeX)."""
    base = table.baseline
    assert base is not None
    axes = [a for a in table.axes if not (a == "checkpoint" and "step" in table.axes)]
    grid = Grid([*axes, *(f"Δ {m} [95% CI]" for m in metrics), "McNemar p", "p (Holm)"])
    for r in table.rows:
        grid.rows.append([_value(r.axes.get(a)) for a in axes]
                         + _baseline_cells(r, base, metrics, digits))
    grid.notes.append(_baseline_note(table, base))
    return grid


def _baseline_note(table: SetTable, base: MemberRow) -> str:
    return (f"Δ = member - baseline ({_axes(base.axes)}), paired over shared episodes; "
            "95% CI: paired bootstrap, 10000 resamples; p: exact McNemar on success, "
            f"Holm-corrected across {sum(1 for r in table.rows if r.vs_baseline)} members")


def member_grid(table: SetTable, metrics: list[str], digits: int, *,
                baseline: bool = True) -> Grid:
    grid = Grid([*table.axes, "state", *metrics, "n"])
    base = table.baseline if baseline else None
    if base is not None:
        grid.headers += [f"Δ {m} [95% CI]" for m in metrics] + ["McNemar p", "p (Holm)"]
        grid.notes.append(_baseline_note(table, base))
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
    if table.race is not None:
        grid.notes.append(race_note(table.race))
    grid.notes.append("bold: the best mean per metric (of the members over the most "
                      "episodes; lower for steps, path_length, nav_error); errors count as "
                      "failures")
    return grid


def compact_grid(table: SetTable, grid: Grid) -> Grid:
    """``grid`` (a member grid) for a narrow screen: without the checkpoint's file name
    where a step names it, nor a state column where every member is done."""
    drop = set()
    if "checkpoint" in table.axes and "step" in table.axes:
        drop.add(table.axes.index("checkpoint"))
    if table.rows and all(r.state == "done" and r.attempts <= 1 and r.eliminated_at is None
                          for r in table.rows):
        drop.add(len(table.axes))
    if not drop:
        return grid
    keep = [j for j in range(len(grid.headers)) if j not in drop]
    where = {j: n for n, j in enumerate(keep)}
    return Grid([grid.headers[j] for j in keep], [[row[j] for j in keep] for row in grid.rows],
                {(i, where[j]) for i, j in grid.bold if j in where}, list(grid.notes))


def _check_pivot(table: SetTable, pivot: str) -> None:
    if pivot not in table.axes:
        raise ValueError(f"--pivot {pivot}: the set has no axis {pivot!r} (axes: "
                         f"{', '.join(table.axes)})")


def determined_by(table: SetTable, axis: str) -> set[str]:
    """The other axes whose value the value of ``axis`` fixes (a checkpoint's step):
    spreading ``axis`` over the columns with such an axis in the rows gives a diagonal."""
    out = set()
    for other in table.axes:
        if other == axis:
            continue
        seen: dict[str, str] = {}
        if all(seen.setdefault(_value(r.axes.get(axis)), _value(r.axes.get(other)))
               == _value(r.axes.get(other)) for r in table.rows):
            out.add(other)
    return out


def pivot_choices(table: SetTable) -> list[str]:
    """The axes worth spreading over the columns: some row then holds two values or more
    (none for a set of one axis, like a checkpoint set's checkpoint and its step)."""
    choices = []
    for axis in table.axes:
        others = [a for a in table.axes if a != axis and a not in determined_by(table, axis)]
        rows: dict[tuple, set[str]] = {}
        for r in table.rows:
            rows.setdefault(tuple(_value(r.axes.get(a)) for a in others), set()).add(
                _value(r.axes.get(axis)))
        if others and any(len(v) > 1 for v in rows.values()):
            choices.append(axis)
    return choices


def pivot_grid(table: SetTable, metrics: list[str], pivot: str, digits: int) -> Grid:
    _check_pivot(table, pivot)
    tied = determined_by(table, pivot)
    others = [a for a in table.axes if a != pivot and a not in tied]
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
    cells.append(p_text(d.mcnemar_p))
    cells.append(p_text(d.mcnemar_p_holm))
    return cells


def race_note(race: RaceStanding) -> str:
    """What a racing set's table says of its race."""
    where = "decided" if race.decided else "racing"
    members = round(race.alpha / race.member_alpha)
    return (f"race on {race.metric} ({where} at n={race.n} of {race.full_n}, "
            f"{len(race.survivors)} left): 'out at n=N': eliminated after N episodes, its "
            f"betting CS of the {race.target} mean (each member's at "
            f"{race.member_alpha:.3g} = {race.alpha:g} / "
            f"{members}, Bonferroni) wholly below the best member's")


def p_text(p: float | None) -> str:
    return f"{p:.3g}" if p is not None else MISSING


def _state(r: MemberRow) -> str:
    if r.eliminated_at is not None:  # a racing set's: fed no more after n episodes
        return f"out at n={r.eliminated_at}"
    return r.state if r.attempts <= 1 else f"{r.state} ({r.attempts} attempts)"


def _value(v: Any) -> str:
    return MISSING if v is None else str(v)


def _axes(axes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in axes.items())


def rich_table(table: SetTable, *, metrics: list[str] | None = None, pivot: str | None = None,
               digits: int = 3, width: int | None = None) -> Any:
    """The table as a :class:`rich.table.Table` (bold best cells, notes as its caption).

    Every metric unless ``metrics`` names some; in ``width`` columns the last metrics are
    left out until it fits (a cell is never wrapped) and the caption names them."""
    shown = [m for m in (metrics or table.metrics) if m in table.metrics] or table.metrics
    grid, left_out = fit_grid(lambda names: pivot_grid(table, names, pivot, digits) if pivot
                              else member_grid(table, names, digits), shown, width)
    notes = list(grid.notes)
    if left_out:
        notes.append(f"not shown at {width} columns: {', '.join(left_out)} "
                     "(--metrics NAME,... or --format md)")
    return rich_grid(grid, columns=[{"no_wrap": True}] * len(grid.headers),
                      title=f"set {table.set_id}", caption="\n".join(notes))


def _csv(table: SetTable, metrics: list[str]) -> str:
    header = [*table.axes, "state", "run_id"]
    for m in metrics:
        header += [f"{m}_mean", f"{m}_ci_lo", f"{m}_ci_hi", f"{m}_n"]
    if table.baseline is not None:
        for m in metrics:
            header += [f"{m}_diff", f"{m}_diff_ci_lo", f"{m}_diff_ci_hi"]
        header += ["mcnemar_p", "mcnemar_p_holm"]
    rows = []
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
        rows.append(row)
    return csv_text(header, rows)


def _blank(v: Any) -> Any:
    return "" if v is None else v
