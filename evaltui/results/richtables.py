"""The results table as the terminal shows it (rich): ``eval``, ``show`` and ``verify``,
and the same metrics by group (``--by``).

Means are over every scored episode, errors and timeouts counting as failures; the
caption says so whenever there were any, and an "ok only" column shows the diagnosis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from evaltui.contract.views import data_label
from evaltui.results.groups import OVERALL, MetricGroup, metric_names
from evaltui.results.stopnote import CS_TITLE, T_TITLE, stop_line, stopped_of


def metrics_table(summary: dict[str, Any]) -> Table:
    """The results table: mean, 95% CI and n per metric, with the error rule stated."""
    errors = int(summary.get("error_count") or 0)
    caption = None
    if errors:
        first = summary.get("first_error") or {}
        caption = (f"errors count as failures: {errors} episode(s) ended error/timeout; "
                   f"first (episode {first.get('episode_index')}): {first.get('message')}")
    stopped, line = stopped_of(summary), stop_line(summary)
    if line is not None:
        caption = f"{line}\n{caption}" if caption else line
    table = Table(title=f"{summary.get('graph_name')} on "
                  f"{data_label(summary.get('dataset'), summary.get('split'))}",
                  caption=caption, caption_justify="left")
    table.add_column("metric")
    table.add_column("mean", justify="right")
    table.add_column(T_TITLE if stopped else "95% CI", justify="right")
    if stopped:
        table.add_column(CS_TITLE, justify="right")
    table.add_column("n", justify="right")
    ci = summary.get("metrics_ci95") or {}
    ns = summary.get("metrics_n") or {}
    ok_only = summary.get("metrics_ok_only") or {}
    if errors:
        table.add_column("ok only", justify="right")
    for name, mean in (summary.get("metrics") or {}).items():
        lo_hi = ci.get(name)
        cells = [name, f"{mean:.4f}", f"[{lo_hi[0]:.4f}, {lo_hi[1]:.4f}]" if lo_hi else "-"]
        if stopped:
            cs = stopped.get("interval") if stopped.get("metric") == name else None
            cells.append(f"[{cs[0]:.4f}, {cs[1]:.4f}]" if cs else "")
        cells.append(str(ns.get(name, "?")))
        if errors:
            cells.append(f"{ok_only[name]:.4f}" if name in ok_only else "-")
        table.add_row(*cells)
    return table


def grouped_metrics_table(field: str, groups: Sequence[MetricGroup]) -> Table:
    """Metrics by ``field`` (``--by``): one row per group, a "mean [95% CI]" cell per
    metric and n episodes; the overall row (over every episode) last."""
    names = metric_names(groups)
    table = Table(title=f"by {field}: mean [95% CI]", caption="errors count as failures; "
                  f"'{OVERALL}' is over every episode", caption_justify="left")
    table.add_column(field, no_wrap=True)
    table.add_column("n", justify="right")
    for name in names:
        table.add_column(name, justify="right", overflow="fold")
    for g in groups:
        cells = [g.key, str(g.episodes)]
        for name in names:
            mean, ci = g.stats.means.get(name), g.stats.ci95.get(name)
            # The interval on a line of its own, numbers to three significant places at
            # most: at 80 columns a cell folds between the two, never inside a number.
            cells.append("-" if mean is None else
                         f"{_num(mean)}\n[{_num(ci[0], 2)}, {_num(ci[1], 2)}]" if ci
                         else _num(mean))
        table.add_row(*cells, end_section=g is groups[-2] if len(groups) > 1 else False)
    return table


def _num(value: float, small: int = 3) -> str:
    """0.626, 73.1, 176: ``small`` decimals below 10, then fewer (a return of 176.149 has
    no use for the last three); an interval's bounds take two, so that a narrow column
    breaks one after its comma."""
    size = abs(value)
    return f"{value:.{small}f}" if size < 10 else f"{value:.1f}" if size < 100 \
        else f"{value:.0f}"
