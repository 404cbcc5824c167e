"""The results table as the terminal shows it (rich): ``eval``, ``show`` and ``verify``.

Means are over every scored episode, errors and timeouts counting as failures; the
caption says so whenever there were any, and an "ok only" column shows the diagnosis.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from evaltui.views import data_label


def metrics_table(summary: dict[str, Any]) -> Table:
    """The results table: mean, 95% CI and n per metric, with the error rule stated."""
    errors = int(summary.get("error_count") or 0)
    caption = None
    if errors:
        first = summary.get("first_error") or {}
        caption = (f"errors count as failures: {errors} episode(s) ended error/timeout; "
                   f"first (episode {first.get('episode_index')}): {first.get('message')}")
    table = Table(title=f"{summary.get('graph_name')} on "
                  f"{data_label(summary.get('dataset'), summary.get('split'))}",
                  caption=caption, caption_justify="left")
    table.add_column("metric")
    table.add_column("mean", justify="right")
    table.add_column("95% CI", justify="right")
    table.add_column("n", justify="right")
    ci = summary.get("metrics_ci95") or {}
    ns = summary.get("metrics_n") or {}
    ok_only = summary.get("metrics_ok_only") or {}
    if errors:
        table.add_column("ok only", justify="right")
    for name, mean in (summary.get("metrics") or {}).items():
        lo_hi = ci.get(name)
        cells = [name, f"{mean:.4f}", f"[{lo_hi[0]:.4f}, {lo_hi[1]:.4f}]" if lo_hi else "-",
                 str(ns.get(name, "?"))]
        if errors:
            cells.append(f"{ok_only[name]:.4f}" if name in ok_only else "-")
        table.add_row(*cells)
    return table
