"""The set's tables as a reader takes them (issue 35, item 11): the best marked the way
each metric improves and only among means over as many episodes, a LaTeX table a page
holds with its Δ as math, and a terminal table with every metric that fits its width."""

from __future__ import annotations

import io

from rich.console import Console

from evaltui.sets.render import pivot_choices, pivot_grid, render, rich_table
from evaltui.sets.stats import BaselineDiff, MetricDiff
from evaltui.sets.table import MemberRow, SetTable, _best

METRICS = ["success", "spl", "ndtw", "sdtw", "path_length", "nav_error", "steps"]


def row(key: str, step: int, success: float, nav: float, nav_n: int = 20,
        steps: float = 30.0, path: float = 9.0) -> MemberRow:
    values = {"success": success, "spl": success * 0.8, "ndtw": 0.5, "sdtw": success * 0.5,
              "path_length": path, "nav_error": nav, "steps": steps}
    n = {m: 20 for m in values} | {"nav_error": nav_n, "path_length": nav_n}
    return MemberRow(key, {"checkpoint": f"p_{step}.npz", "step": step}, f"r{key}", "done",
                     1, metrics=values, metrics_ci95={m: [v - 0.1, v + 0.1]
                                                      for m, v in values.items()},
                     metrics_n=n)


def test_best_is_lowest_for_lengths_steps_and_errors_over_the_most_episodes() -> None:
    rows = [row("a", 1, 0.4, nav=1.0, nav_n=11, steps=40.0, path=12.0),  # lowest, 11 of 20
            row("b", 2, 0.6, nav=2.0, steps=20.0, path=8.0),
            row("c", 3, 0.5, nav=3.0, steps=25.0, path=7.0)]
    best = _best(rows, METRICS)
    assert best["success"] == ["b"]
    assert best["steps"] == ["b"]  # fewest steps, not most
    assert best["nav_error"] == ["b"]  # a's 1.0 covers 11 of 20 episodes: not a winner
    assert best["path_length"] == ["c"]


def table(baseline: bool = True) -> SetTable:
    rows = [row("a", 1, 0.4, 2.0), row("b", 2, 0.6, 1.5)]
    t = SetTable("ck", "ck", ["checkpoint", "step"], METRICS, rows, best=_best(rows, METRICS))
    if baseline:
        t.baseline = rows[0]
        rows[1].vs_baseline = BaselineDiff(
            n_pairs=20, metrics={m: MetricDiff(m, 20, 0.4, 0.5, 0.1, (0.0, 0.2))
                                  for m in METRICS},
            mcnemar_p=0.5, mcnemar_p_holm=0.5)
    return t


def test_the_latex_table_is_two_tables_a_page_holds_with_delta_as_math() -> None:
    tex = render(table(), "latex")
    tabulars = [line for line in tex.splitlines() if line.startswith("\\begin{tabular}")]
    assert len(tabulars) == 2
    for line in tabulars:
        cols = line.split("{")[2].rstrip("}")
        assert len(cols) <= 10, line
    body = [line for line in tex.splitlines() if not line.startswith("%")]
    assert not any("Δ" in line for line in body) and "$\\Delta$ success" in tex


def test_the_terminal_table_shows_every_metric_that_fits_and_names_the_rest() -> None:
    wide = Console(width=400, record=True, file=io.StringIO())
    wide.print(rich_table(table(baseline=False), width=400))
    text = wide.export_text()
    for m in METRICS:
        assert m in text
    narrow = Console(width=80, record=True, file=io.StringIO())
    narrow.print(rich_table(table(baseline=False), width=80))
    lines = narrow.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "success" in lines[2] or any("success" in line for line in lines[:4])
    said = " ".join(lines)
    assert "not shown at 80 columns:" in said and "steps" in said
    assert any("p_1.npz" in line for line in lines)  # cells whole: no wrapped rows
    assert sum("p_1.npz" in line for line in lines) == 1


def test_a_one_axis_set_has_no_pivot_and_a_pivot_leaves_no_diagonal() -> None:
    t = table(baseline=False)
    assert pivot_choices(t) == []
    grid = pivot_grid(t, ["success"], "checkpoint", 3)
    assert len(grid.rows) == 1 and "-" not in grid.rows[0]
