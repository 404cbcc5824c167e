"""``evaltui report SET_DIR``: a set's static site -- its table, its plots over
checkpoints, and every member's own run report below it.

Layout::

    index.html                  the set's table (mean [95% CI] per metric, n, the best
                                marked, differences to the baseline), a pivot table
                                (``--pivot AXIS``), the plots, a link per member
    plots/<metric>_over_steps.svg   (a set with a checkpoint axis)
    runs/<run_id>/...           each member's run report (report.build.build_run_site)
    assets/, .evaltui-report    as for a run

The numbers are the set table's (:mod:`evaltui.sets.table`): each member's own
summary.json, and the baseline comparison ``set show --baseline`` prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaltui.contract.setspec import member_label
from evaltui.report.build import build_run_site, copy_assets
from evaltui.report.episodechoice import EpisodeChoice
from evaltui.report.html import esc, number, page, value_attr
from evaltui.report.outdir import publish
from evaltui.report.setplots import StepPoint, metric_over_steps_svg
from evaltui.results.runrows import RunDirError
from evaltui.results.tablewriter import html_table
from evaltui.runview.snapshot import read_snapshot
from evaltui.sets.expansion import STEP_AXIS
from evaltui.sets.render import member_grid, p_text, pivot_grid

RUNS_DIR = "runs"
PLOTS_DIR = "plots"
BEST_MARK = "▲"


@dataclass
class SetSite:
    """What :func:`write_set_report` wrote."""

    members: list[str] = field(default_factory=list)
    """Run ids that got a run report."""
    plots: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Members without a readable run dir (a line each for the user)."""


def write_set_report(table: Any, out: Path, choice: EpisodeChoice, *, pivot: str | None,
                     force: bool = False,
                     snapshot: Callable[[Path], Any] | None = None) -> SetSite:
    """The site of ``table`` (a :class:`~evaltui.sets.table.SetTable`, baseline attached
    if any) at ``out``."""

    read = snapshot or read_snapshot
    site = SetSite()
    sources = [r.run_dir for r in table.rows if r.run_dir is not None]

    def build(tmp: Path) -> None:
        copy_assets(tmp)
        for row in table.rows:
            if row.run_dir is None or row.run_id is None:
                site.skipped.append(f"{member_label(row.axes)}: no run yet ({row.state})")
                continue
            try:
                snap = read(row.run_dir)
            except RunDirError as exc:
                site.skipped.append(f"{member_label(row.axes)}: {exc}")
                continue
            build_run_site(snap, tmp / RUNS_DIR / row.run_id, choice, depth=2)
            site.members.append(row.run_id)
        site.plots = _write_plots(table, tmp / PLOTS_DIR)
        (tmp / "index.html").write_text(set_page(table, pivot, set(site.members), site.plots))

    publish(out, build, kind="set", force=force, sources=sources, of=f"set {table.set_id}")
    return site


def step_lines(table: Any, metric: str) -> dict[str, list[StepPoint]]:
    """Points of ``metric`` over the step axis, a line per value of the other axes."""

    others = [a for a in table.axes if a not in (STEP_AXIS, "checkpoint")]
    lines: dict[str, list[StepPoint]] = {}
    for r in table.rows:
        step = r.axes.get(STEP_AXIS)
        if not isinstance(step, int) or metric not in r.metrics:
            continue
        label = ", ".join(f"{a}={r.axes.get(a)}" for a in others) or metric
        ci = r.metrics_ci95.get(metric)
        bounds = (float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 \
            else None
        lines.setdefault(label, []).append((float(step), r.metrics[metric], bounds))
    return lines


def _write_plots(table: Any, dest: Path) -> list[str]:

    if STEP_AXIS not in table.axes:
        return []
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for metric in table.metrics:
        if metric in ("steps",):
            continue
        name = f"{metric}_over_steps.svg"
        (dest / name).write_text(metric_over_steps_svg(metric, step_lines(table, metric)))
        names.append(name)
    return names


def set_page(table: Any, pivot: str | None, reported: set[str], plots: list[str]) -> str:

    grid = member_grid(table, table.metrics, 3)
    body = [f'<header class="run"><h1>Set {esc(table.set_id)}</h1>',
            f"<p>{len(table.rows)} members, "
            f"{sum(r.state == 'done' for r in table.rows)} done; axes: "
            f"{esc(', '.join(table.axes) or '-')}</p></header><main>",
            "<section><h2>Members</h2>",
            '<p class="hint">Mean over every scored episode with its 95% CI, from each '
            f"member's summary.json; {BEST_MARK}: the best mean per metric.</p>",
            members_table(table, reported)]
    if table.baseline is not None:
        body += ["<section><h2>Against the baseline</h2>",
                 f'<p class="hint">{esc(grid.notes[0])}</p>', baseline_table(table),
                 "</section>"]
    body.append("</section>")
    if pivot:
        pgrid = pivot_grid(table, [m for m in table.metrics if m != "steps"], pivot, 3)
        body += [f'<section><h2>By {esc(pivot)}</h2>',
                 html_table(pgrid, "set-pivot", bold_mark=BEST_MARK),
                 f'<p class="hint">{esc(" ".join(pgrid.notes))}</p></section>']
    if plots:
        body.append('<section id="plots"><h2>Over checkpoint steps</h2>')
        for name in plots:
            body.append(f'<figure><img src="{PLOTS_DIR}/{esc(name)}" alt="{esc(name)}">'
                        f'<figcaption><a href="{PLOTS_DIR}/{esc(name)}">{esc(name)}</a>'
                        "</figcaption></figure>")
        body.append("</section>")
    body.append("</main>")
    return page(f"evaltui report: set {table.set_id}", "\n".join(body), root="")


def members_table(table: Any, reported: set[str]) -> str:
    head = "".join(f"<th>{esc(a)}</th>" for a in table.axes)
    head += "<th>state</th>" + "".join(f"<th>{esc(m)}</th>" for m in table.metrics)
    head += "<th>n</th><th>run</th>"
    rows = []
    for r in table.rows:
        cells = "".join(f'<td class="axis" data-axis="{esc(a)}">{esc(r.axes.get(a))}</td>'
                        for a in table.axes)
        cells += f'<td class="state">{esc(r.state)}</td>'
        for m in table.metrics:
            cells += _metric_cell(r, m, r.key in table.best.get(m, ()))
        n = r.metrics_n.get("success", max(r.metrics_n.values(), default=None))
        cells += f'<td class="n">{"-" if n is None else n}</td>'
        link = (f'<a class="member-link" href="{RUNS_DIR}/{esc(r.run_id)}/index.html">'
                f"{esc(r.run_id)}</a>") if r.run_id in reported else esc(r.run_id or "-")
        cells += f"<td>{link}</td>"
        rows.append(f'<tr data-key="{esc(r.key)}">{cells}</tr>')
    return (f'<table id="set-members" class="metrics"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _metric_cell(r: Any, metric: str, best: bool) -> str:
    if metric not in r.metrics:
        return f'<td class="mean" data-metric="{esc(metric)}">-</td>'
    mean = r.metrics[metric]
    ci = r.metrics_ci95.get(metric)
    text = number(mean, 3)
    attrs = f'data-metric="{esc(metric)}" data-value="{value_attr(mean)}"'
    if isinstance(ci, list) and len(ci) == 2:
        text += f" [{number(ci[0], 3)}, {number(ci[1], 3)}]"
        attrs += f' data-lo="{value_attr(ci[0])}" data-hi="{value_attr(ci[1])}"'
    if best:
        return f'<td class="mean best" {attrs}><strong>{text} {BEST_MARK}</strong></td>'
    return f'<td class="mean" {attrs}>{text}</td>'


def baseline_table(table: Any) -> str:
    base = table.baseline
    metrics = [m for m in table.metrics if m != "steps"]
    head = "".join(f"<th>{esc(a)}</th>" for a in table.axes)
    head += "".join(f"<th>Δ {esc(m)} [95% CI]</th>" for m in metrics)
    head += "<th>McNemar p</th><th>p (Holm)</th>"
    rows = []
    for r in table.rows:
        cells = "".join(f"<td>{esc(r.axes.get(a))}</td>" for a in table.axes)
        if r is base:
            cells += f'<td colspan="{len(metrics) + 2}">baseline</td>'
        elif r.vs_baseline is None:
            cells += f'<td colspan="{len(metrics) + 2}">{esc(r.vs_baseline_note or "-")}</td>'
        else:
            d = r.vs_baseline
            for m in metrics:
                diff = d.metrics.get(m)
                if diff is None:
                    cells += "<td>-</td>"
                    continue
                ci = (f" [{diff.ci95[0]:+.3f}, {diff.ci95[1]:+.3f}]" if diff.ci95 else "")
                cells += (f'<td class="diff" data-metric="{esc(m)}" '
                          f'data-value="{value_attr(diff.diff)}">{diff.diff:+.3f}{ci}</td>')
            cells += f'<td class="p">{p_text(d.mcnemar_p)}</td>'
            cells += f'<td class="p-holm" data-value="{value_attr(d.mcnemar_p_holm)}">' \
                     f"{p_text(d.mcnemar_p_holm)}</td>"
        rows.append(f'<tr data-key="{esc(r.key)}">{cells}</tr>')
    return (f'<table id="set-baseline" class="metrics"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')
