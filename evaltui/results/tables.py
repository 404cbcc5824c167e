"""Results tables: a run's summary, a comparison or the metrics by group (``--by``) as
Markdown, CSV or LaTeX for papers, and as the terminal shows them (``eval``, ``show``,
``verify``, ``compare``); :mod:`evaltui.results.tablewriter` writes them.

Every renderer takes plain data (a summary.json dict, a :class:`Comparison`) and returns
the table as text, ending in a newline. Numbers carry ``digits`` decimals (default 3);
``digits=None`` (the CLI without ``--digits``) is 3 in Markdown and LaTeX and, in CSV,
every digit the number has (at least 3 decimals): a CSV is read by programs, and
rounding there loses what the run measured.
Markdown and LaTeX add note lines under the table (how errors were counted, how a CI
was made); CSV is the bare table, one header row, so any CSV reader takes it as is.
LaTeX uses booktabs (``\\usepackage{booktabs}``).
In the terminal, means are over every scored episode, errors and timeouts counting as
failures; the caption says so whenever there were any, and an "ok only" column shows the
diagnosis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.table import Table

from evaltui.contract.views import data_label
from evaltui.results.compare import Comparison
from evaltui.results.groups import OVERALL, MetricGroup, metric_names
from evaltui.results.stopnote import CS_TITLE, T_TITLE, stop_line, stopped_of
from evaltui.results.tablewriter import Grid, csv_text, latex, latex_escape, markdown, rich_grid

Format = Literal["md", "csv", "latex"]
FORMATS: tuple[Format, ...] = ("md", "csv", "latex")
FAILURE_STATUSES = ("error", "timeout")

Number = float | int | None
DEFAULT_DIGITS = 3


@dataclass(frozen=True)
class _Column:
    title: str
    latex: str
    """The LaTeX header cell (already escaped)."""
    csv: str


@dataclass(frozen=True)
class _Row:
    name: str
    values: Sequence[Number]
    """One value per column; the CI and n follow them in every format."""
    ci: tuple[float, float] | None
    n: int | None
    group: str | None = None
    """The row's group (``--by``): a first column, when the table is grouped."""


def summary_table(summary: Mapping[str, Any], *, fmt: Format, digits: int | None = 3) -> str:
    """The run's metrics: metric, mean, 95% CI, n.

    n is ``metrics_n[name]`` when the summary has it, else the count of ok episodes (what
    older summaries averaged over).
    """
    metrics = summary.get("metrics") or {}
    cis = summary.get("metrics_ci95") or {}
    ns = summary.get("metrics_n")
    counts = summary.get("counts_by_status") or {}
    rows = []
    for name, mean in metrics.items():
        n = ns.get(name) if isinstance(ns, Mapping) else counts.get("ok")
        ci = cis.get(name)
        rows.append(_Row(str(name), [_num(mean)], _pair(ci), n if isinstance(n, int) else None))
    notes = []
    errors = summary.get("error_count")
    if isinstance(errors, int) and errors > 0:
        total = sum(counts.get(s, 0) for s in ("ok", *FAILURE_STATUSES))
        notes.append(f"errors count as failures ({errors} of {total} episodes errored)")
    line = stop_line(summary, DEFAULT_DIGITS if digits is None else digits)
    if line is not None:
        notes.append(line)
    columns = [_Column("mean", "Mean", "mean")]
    return _render(fmt, columns, rows, notes, digits=digits,
                   ci_title=T_TITLE if line else "95% CI")


def compare_table(comparison: Comparison, *, fmt: Format, digits: int | None = 3,
                  label_a: str = "A", label_b: str = "B") -> str:
    """B against A per metric: mean A, mean B, B - A, its bootstrap 95% CI, n pairs."""
    rows = [_Row(m.name, [m.mean_a, m.mean_b, m.diff], m.ci95, m.n)
            for m in comparison.metrics]
    notes = [f"A = {label_a}; B = {label_b}; {comparison.n_pairs} episode pairs",
             f"95% CI of B - A: paired bootstrap, percentile method, "
             f"{comparison.resamples} resamples, seed {comparison.seed}"]
    if comparison.dropped_a or comparison.dropped_b:
        notes.append(f"compared the shared episodes only: {len(comparison.dropped_a)} only in "
                     f"A and {len(comparison.dropped_b)} only in B left out")
    test = comparison.mcnemar
    digits_p = DEFAULT_DIGITS if digits is None else digits
    if test is not None:
        notes.append(f"McNemar exact test on success: {test.b} A-only, {test.c} B-only "
                     f"successes, p = {test.p_value:.{max(digits_p, 1)}g}")
    columns = [_Column("mean A", "A", "mean_a"), _Column("mean B", "B", "mean_b"),
               _Column("B - A", "B $-$ A", "diff")]
    return _render(fmt, columns, rows, notes, digits=digits, ci_title="95% CI (B - A)")


def grouped_table(field: str, groups: Sequence[MetricGroup], *, fmt: Format,
                  digits: int | None = 3) -> str:
    """Metrics by ``field`` (``--by``), long form: one row per group and metric (mean,
    95% CI, n), the overall group (``all``) last."""
    rows = [_Row(name, [_num(g.stats.means[name])], _pair(g.stats.ci95.get(name)),
                 g.stats.n.get(name), group=g.key)
            for g in groups for name in g.stats.means]
    notes = [f"by {field}: mean, Student-t 95% CI and n per group; '{OVERALL}' is over "
             "every episode; errors count as failures"]
    return _render(fmt, [_Column("mean", "Mean", "mean")], rows, notes, digits=digits,
                   ci_title="95% CI", group_title=field)


# ---- the terminal's tables --------------------------------------------------------------------


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
    grid = Grid(["metric", "mean", T_TITLE if stopped else "95% CI"]
                + ([CS_TITLE] if stopped else []) + ["n"] + (["ok only"] if errors else []))
    grid.align = "l" + "r" * (len(grid.headers) - 1)
    ci = summary.get("metrics_ci95") or {}
    ns = summary.get("metrics_n") or {}
    ok_only = summary.get("metrics_ok_only") or {}
    for name, mean in (summary.get("metrics") or {}).items():
        lo_hi = ci.get(name)
        cells = [name, f"{mean:.4f}", f"[{lo_hi[0]:.4f}, {lo_hi[1]:.4f}]" if lo_hi else "-"]
        if stopped:
            cs = stopped.get("interval") if stopped.get("metric") == name else None
            cells.append(f"[{cs[0]:.4f}, {cs[1]:.4f}]" if cs else "")
        cells.append(str(ns.get(name, "?")))
        if errors:
            cells.append(f"{ok_only[name]:.4f}" if name in ok_only else "-")
        grid.rows.append(cells)
    return rich_grid(grid, title=f"{summary.get('graph_name')} on "
                      f"{data_label(summary.get('dataset'), summary.get('split'))}",
                      caption=caption, caption_justify="left")


def grouped_metrics_table(field: str, groups: Sequence[MetricGroup]) -> Table:
    """Metrics by ``field`` (``--by``): one row per group, a "mean [95% CI]" cell per
    metric and n episodes; the overall row (over every episode) last."""
    names = metric_names(groups)
    grid = Grid([field, "n", *names], align="l" + "r" * (1 + len(names)))
    for g in groups:
        cells = [g.key, str(g.episodes)]
        for name in names:
            mean, ci = g.stats.means.get(name), g.stats.ci95.get(name)
            # The interval on a line of its own, numbers to three significant places at
            # most: at 80 columns a cell folds between the two, never inside a number.
            cells.append("-" if mean is None else
                         f"{_short(mean)}\n[{_short(ci[0], 2)}, {_short(ci[1], 2)}]" if ci
                         else _short(mean))
        grid.rows.append(cells)
    return rich_grid(grid, columns=[{"no_wrap": True}, {}, *[{"overflow": "fold"}] * len(names)],
                      section_before_last=True, title=f"by {field}: mean [95% CI]",
                      caption=f"errors count as failures; '{OVERALL}' is over every episode",
                      caption_justify="left")


def comparison_table(comparison: Comparison) -> Table:
    """``evaltui compare``'s table: B against A per metric, a difference whose CI leaves
    out 0 in green (B better) or red."""
    grid = Grid(["metric", "mean A", "mean B", "B - A", "95% CI (B - A)", "n"], align="lrrrrr")
    for m in comparison.metrics:
        style = "" if m.ci95 is None or m.ci95[0] <= 0 <= m.ci95[1] else \
            ("green" if m.diff > 0 else "red")
        grid.rows.append([m.name, f"{m.mean_a:.4f}", f"{m.mean_b:.4f}",
                          f"[{style}]{m.diff:+.4f}[/]" if style else f"{m.diff:+.4f}",
                          f"[{m.ci95[0]:+.4f}, {m.ci95[1]:+.4f}]" if m.ci95 else "-", str(m.n)])
    return rich_grid(grid, columns=[{"no_wrap": True}] * 6, box=None, header_style="bold")


# ---- the grids of each format ----------------------------------------------------------------


def _render(fmt: Format, columns: list[_Column], rows: list[_Row], notes: list[str], *,
            digits: int | None, ci_title: str, group_title: str | None = None) -> str:
    exact = digits is None and fmt == "csv"
    digits = DEFAULT_DIGITS if digits is None else digits
    if digits < 0:
        raise ValueError(f"digits must be >= 0, got {digits}")
    lead = [group_title] if group_title else []
    align = "l" * (1 + len(lead)) + "r" * (len(columns) + 2)
    if fmt == "csv":
        num = _exact if exact else _fmt
        return csv_text(
            [*lead, "metric", *(c.csv for c in columns), "ci_low", "ci_high", "n"],
            [[*([row.group] if group_title else []), row.name,
              *(num(v, digits, "") for v in row.values),
              *(num(bound, digits, "") for bound in (row.ci or (None, None))),
              "" if row.n is None else row.n] for row in rows])
    if fmt == "md":
        return markdown(Grid(
            [*lead, "metric", *(c.title for c in columns), ci_title, "n"],
            [[*([str(row.group)] if group_title else []), row.name,
              *(_fmt(v, digits, "-") for v in row.values), _ci(row.ci, digits, "-"),
              "-" if row.n is None else str(row.n)] for row in rows], notes=notes, align=align))
    if fmt == "latex":
        return latex(Grid(
            [*map(latex_escape, lead), "Metric", *(c.latex for c in columns),
             latex_escape(ci_title), "$n$"],
            [[*([latex_escape(str(row.group))] if group_title else []), latex_escape(row.name),
              *(_tex_num(v, digits) for v in row.values), _tex_ci(row.ci, digits),
              "--" if row.n is None else str(row.n)] for row in rows],
            notes=notes, align=align), escape=False, notes_in_table=True)
    raise ValueError(f"unknown table format {fmt!r} (one of {', '.join(FORMATS)})")


# ---- numbers ---------------------------------------------------------------------------------


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, Sequence) and len(value) == 2:
        lo, hi = _num(value[0]), _num(value[1])
        if lo is not None and hi is not None:
            return lo, hi
    return None


def _fmt(value: Number, digits: int, missing: str) -> str:
    if value is None:
        return missing
    text = f"{value:.{digits}f}"
    # "-0.000" is a rounding artefact, not a sign worth printing.
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _exact(value: Number, digits: int, missing: str) -> str:
    """Every digit of ``value`` (the shortest text that reads back as it), with at least
    ``digits`` decimals: 0.25 -> "0.250", 5/12 -> "0.4166666666666667"."""
    if value is None:
        return missing
    text = repr(float(value) + 0.0)  # + 0.0: -0.0 is no sign worth printing
    if "e" in text:  # 1e-05: fixed-point
        text = f"{value:.20f}".rstrip("0")
    if not text[-1].isdigit():  # inf, nan
        return text
    whole, _, decimals = text.partition(".")
    return f"{whole}.{decimals.ljust(digits, '0')}" if digits or decimals else whole


def _ci(ci: tuple[float, float] | None, digits: int, missing: str) -> str:
    return missing if ci is None else f"[{_fmt(ci[0], digits, '')}, {_fmt(ci[1], digits, '')}]"


def _tex_num(value: Number, digits: int) -> str:
    text = _fmt(value, digits, "--")
    return "$-$" + text[1:] if text.startswith("-") and text != "--" else text


def _tex_ci(ci: tuple[float, float] | None, digits: int) -> str:
    return "--" if ci is None else f"[{_tex_num(ci[0], digits)}, {_tex_num(ci[1], digits)}]"


def _short(value: float, small: int = 3) -> str:
    """0.626, 73.1, 176: ``small`` decimals below 10, then fewer (a return of 176.149 has
    no use for the last three); an interval's bounds take two, so that a narrow column
    breaks one after its comma."""
    size = abs(value)
    return f"{value:.{small}f}" if size < 10 else f"{value:.1f}" if size < 100 \
        else f"{value:.0f}"
