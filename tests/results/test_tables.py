"""Paper tables: Markdown, CSV and LaTeX of a summary and of a comparison."""

from __future__ import annotations

import csv
import io
import re

import pytest
import resultruns as rr

from evaltui.results.compare import compare_rows
from evaltui.results.tables import compare_table, latex_escape, summary_table

SUMMARY = {
    "metrics": {"success": 0.5, "spl": 0.41666, "path_length": 3.25, "nav_error": 1.0},
    "metrics_ci95": {"success": [0.0912, 0.9088], "spl": [0.05, 0.7833],
                     "path_length": [1.5, 5.0], "nav_error": None},
    "metrics_n": {"success": 6, "spl": 6, "path_length": 4, "nav_error": 1},
    "counts_by_status": {"ok": 4, "error": 1, "timeout": 1, "cancelled": 2},
    "error_count": 2,
}


def _latex_rows(text: str) -> list[list[str]]:
    """Body rows of a tabular: the lines between \\midrule and \\bottomrule, split on &."""
    body = text.split("\\midrule\n")[1].split("\\bottomrule")[0]
    return [[c.strip() for c in re.split(r"(?<!\\)&", line.removesuffix(" \\\\"))]
            for line in body.strip().splitlines()]


def test_summary_csv_parses_with_the_csv_module() -> None:
    rows = list(csv.DictReader(io.StringIO(summary_table(SUMMARY, fmt="csv"))))
    assert [r["metric"] for r in rows] == ["success", "spl", "path_length", "nav_error"]
    assert rows[1] == {"metric": "spl", "mean": "0.417", "ci_low": "0.050",
                       "ci_high": "0.783", "n": "6"}
    assert rows[3] == {"metric": "nav_error", "mean": "1.000", "ci_low": "", "ci_high": "",
                       "n": "1"}


def test_summary_markdown_has_the_error_note() -> None:
    text = summary_table(SUMMARY, fmt="md")
    lines = text.splitlines()
    assert lines[0] == "| metric | mean | 95% CI | n |"
    assert lines[1] == "|:---|---:|---:|---:|"
    assert lines[2] == "| success | 0.500 | [0.091, 0.909] | 6 |"
    assert lines[5] == "| nav_error | 1.000 | - | 1 |"
    assert lines[-1] == "errors count as failures (2 of 6 episodes errored)"
    assert all(line.count("|") == 5 for line in lines[:6])


def test_summary_latex_is_booktabs_with_escaped_names() -> None:
    text = summary_table(SUMMARY, fmt="latex", digits=2)
    assert text.startswith("\\begin{tabular}{lrrr}\n\\toprule\n")
    assert "\\midrule" in text and text.endswith("\\end{tabular}\n")
    assert text.index("\\toprule") < text.index("\\midrule") < text.index("\\bottomrule")
    assert "Metric & Mean & 95\\% CI & $n$ \\\\" in text
    assert _latex_rows(text) == [["success", "0.50", "[0.09, 0.91]", "6"],
                                 ["spl", "0.42", "[0.05, 0.78]", "6"],
                                 ["path\\_length", "3.25", "[1.50, 5.00]", "4"],
                                 ["nav\\_error", "1.00", "--", "1"]]
    assert re.search(r"(?<!\\)_", text) is None  # every underscore escaped
    assert "\\multicolumn{4}{l}{\\footnotesize errors count as failures (2 of 6 episodes " \
        "errored)} \\\\" in text


def test_summary_without_metrics_n_or_errors() -> None:
    old = {"metrics": {"success": 1.0}, "metrics_ci95": {"success": [1.0, 1.0]},
           "counts_by_status": {"ok": 5, "cancelled": 1}}
    assert summary_table(old, fmt="md").splitlines()[2:] == ["| success | 1.000 | "
                                                             "[1.000, 1.000] | 5 |"]
    assert "errors count" not in summary_table(old, fmt="latex")
    assert "errors count" not in summary_table({**old, "error_count": 0}, fmt="md")


def test_digits_and_negative_numbers() -> None:
    result = compare_rows(rr.rows_a(), rr.rows_b(), resamples=200)
    path = next(m for m in result.metrics if m.name == "path_length")
    assert path.diff < 0
    md = compare_table(result, fmt="md", digits=1)
    assert f"| path_length | {path.mean_a:.1f} | {path.mean_b:.1f} | {path.diff:.1f} |" in md
    tex = compare_table(result, fmt="latex", digits=4)
    row = next(r for r in _latex_rows(tex) if r[0] == "path\\_length")
    assert row[3] == f"$-${-path.diff:.4f}"
    with pytest.raises(ValueError):
        summary_table(SUMMARY, fmt="md", digits=-1)
    with pytest.raises(ValueError):
        summary_table(SUMMARY, fmt="html")  # type: ignore[arg-type]


def test_compare_tables_in_all_three_formats() -> None:
    result = compare_rows(rr.rows_a(), rr.rows_b(), resamples=300, seed=2)
    rows = list(csv.DictReader(io.StringIO(compare_table(result, fmt="csv"))))
    assert list(rows[0]) == ["metric", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "n"]
    assert [r["metric"] for r in rows] == [m.name for m in result.metrics]
    half = 5e-4 + 1e-12  # three decimals round by up to half a unit (-3.3525 -> -3.353)
    for row, m in zip(rows, result.metrics, strict=True):
        assert float(row["diff"]) == pytest.approx(m.diff, abs=half)
        assert m.ci95 is not None and float(row["ci_low"]) == pytest.approx(m.ci95[0], abs=half)
        assert int(row["n"]) == m.n

    md = compare_table(result, fmt="md", label_a="run_a (bot)", label_b="run_b (model)")
    assert md.splitlines()[0] == "| metric | mean A | mean B | B - A | 95% CI (B - A) | n |"
    assert "A = run_a (bot); B = run_b (model); 12 episode pairs" in md
    assert "paired bootstrap, percentile method, 300 resamples, seed 2" in md
    assert "McNemar exact test on success: 1 A-only, 7 B-only successes, p = 0.0703" in md

    tex = compare_table(result, fmt="latex", label_a="run_a")
    assert "\\toprule" in tex and "\\bottomrule" in tex
    assert all(len(r) == 6 for r in _latex_rows(tex))
    assert "A = run\\_a" in tex and "\\multicolumn{6}{l}" in tex


def test_intersected_comparison_says_what_was_left_out() -> None:
    result = compare_rows(rr.rows_a(), rr.rows_b()[:10], intersect=True, resamples=50)
    assert "compared the shared episodes only: 2 only in A and 0 only in B left out" in \
        compare_table(result, fmt="md")


def test_latex_escape() -> None:
    assert latex_escape("a_b & 50% #1 {x} $y ~ ^ \\") == \
        "a\\_b \\& 50\\% \\#1 \\{x\\} \\$y \\textasciitilde{} \\textasciicircum{} " \
        "\\textbackslash{}"
