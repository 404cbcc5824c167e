"""Results tables for papers: a run's summary or a comparison as Markdown, CSV or LaTeX.

Every renderer takes plain data (a summary.json dict, a :class:`Comparison`) and returns
the table as text, ending in a newline. Numbers carry ``digits`` decimals (default 3);
``digits=None`` (the CLI without ``--digits``) is 3 in Markdown and LaTeX and, in CSV,
every digit the number has (at least 3 decimals): a CSV is read by programs, and
rounding there loses what the run measured.
Markdown and LaTeX add note lines under the table (how errors were counted, how a CI
was made); CSV is the bare table, one header row, so any CSV reader takes it as is.
LaTeX uses booktabs (``\\usepackage{booktabs}``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from evaltui.results.compare import Comparison
from evaltui.results.groups import OVERALL, MetricGroup
from evaltui.results.stopnote import T_TITLE, stop_line

Format = Literal["md", "csv", "latex"]
FORMATS: tuple[Format, ...] = ("md", "csv", "latex")
FAILURE_STATUSES = ("error", "timeout")
_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                   "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                   "^": r"\textasciicircum{}", "Δ": r"$\Delta$"}

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


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped for text mode."""
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in text)


# ---- renderers -------------------------------------------------------------------------------


def _render(fmt: Format, columns: list[_Column], rows: list[_Row], notes: list[str], *,
            digits: int | None, ci_title: str, group_title: str | None = None) -> str:
    exact = digits is None and fmt == "csv"
    digits = DEFAULT_DIGITS if digits is None else digits
    if digits < 0:
        raise ValueError(f"digits must be >= 0, got {digits}")
    if fmt == "csv":
        return _csv(columns, rows, digits, exact, group_title)
    if fmt == "md":
        return _markdown(columns, rows, notes, digits, ci_title, group_title)
    if fmt == "latex":
        return _latex(columns, rows, notes, digits, ci_title, group_title)
    raise ValueError(f"unknown table format {fmt!r} (one of {', '.join(FORMATS)})")


def _csv(columns: list[_Column], rows: list[_Row], digits: int, exact: bool = False,
         group_title: str | None = None) -> str:
    out = io.StringIO()
    fmt = _exact if exact else _fmt
    writer = csv.writer(out, lineterminator="\n")
    lead = [group_title] if group_title else []
    writer.writerow([*lead, "metric", *(c.csv for c in columns), "ci_low", "ci_high", "n"])
    for row in rows:
        lo, hi = row.ci if row.ci else (None, None)
        writer.writerow([*([row.group] if group_title else []), row.name,
                         *(fmt(v, digits, "") for v in row.values),
                         fmt(lo, digits, ""), fmt(hi, digits, ""),
                         "" if row.n is None else row.n])
    return out.getvalue()


def _markdown(columns: list[_Column], rows: list[_Row], notes: list[str], digits: int,
              ci_title: str, group_title: str | None = None) -> str:
    def cells(items: Sequence[str]) -> str:
        return "| " + " | ".join(s.replace("|", "\\|") for s in items) + " |"

    lead = [group_title] if group_title else []
    lines = [cells([*lead, "metric", *(c.title for c in columns), ci_title, "n"]),
             "|" + ":---|" * (1 + len(lead)) + "---:|" * (len(columns) + 2)]
    for row in rows:
        lines.append(cells([*([str(row.group)] if group_title else []), row.name,
                            *(_fmt(v, digits, "-") for v in row.values),
                            _ci(row.ci, digits, "-"), "-" if row.n is None else str(row.n)]))
    for note in notes:  # one paragraph each: consecutive lines would merge into one
        lines.extend(["", note])
    return "\n".join(lines) + "\n"


def _latex(columns: list[_Column], rows: list[_Row], notes: list[str], digits: int,
           ci_title: str, group_title: str | None = None) -> str:
    lead = [latex_escape(group_title)] if group_title else []
    width = len(columns) + 3 + len(lead)
    lines = [r"\begin{tabular}{" + "l" * (1 + len(lead)) + "r" * (width - 1 - len(lead)) + "}",
             r"\toprule",
             " & ".join([*lead, "Metric", *(c.latex for c in columns), latex_escape(ci_title),
                         "$n$"]) + r" \\", r"\midrule"]
    for row in rows:
        cells = [*([latex_escape(str(row.group))] if group_title else []),
                 latex_escape(row.name), *(_tex_num(v, digits) for v in row.values),
                 _tex_ci(row.ci, digits), "--" if row.n is None else str(row.n)]
        lines.append(" & ".join(cells) + r" \\")
    lines.append(r"\bottomrule")
    for note in notes:
        lines.append(rf"\multicolumn{{{width}}}{{l}}{{\footnotesize {latex_escape(note)}}} \\")
    lines.append(r"\end{tabular}")
    return "\n".join(lines) + "\n"


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
