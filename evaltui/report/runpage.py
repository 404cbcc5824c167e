"""A run's report page (``index.html``) and its episode table data (``data/episodes.js``).

The header, notes and metrics table are plain HTML written here, so the numbers read
without any script; the episode table is drawn by ``assets/report.js`` from one compact
data file (rows as arrays, not objects: a 5,000-episode run's file stays well under a
megabyte), a page of rows at a time.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path
from typing import Any

from evaltui.contract.units import duration
from evaltui.nodesets.serverrecord import read_latency
from evaltui.report.grouptable import groups_section
from evaltui.report.html import (
    definition_list,
    esc,
    js_data,
    number,
    page,
    value_attr,
    when,
)
from evaltui.report.svgplots import running_means_svg, steps_histogram_svg
from evaltui.runview.snapshot import RunSnapshot

DATA_DIR = "data"
EPISODES_JS = "episodes.js"
PLOTS_DIR = "plots"
ERROR_CHARS = 160
"""An episode's error in the table: its last line, cut to this length."""
BASE_COLUMNS = ("episode_index", "episode_id", "status", "instruction", "step_count",
                "elapsed_sec", "error")


def header_items(snap: RunSnapshot) -> list[tuple[str, Any]]:
    s = snap.summary
    total = s.get("episodes_total")
    finished = len(snap.rows)
    counts = s.get("counts_by_status") or {}
    return [
        ("graph", s.get("graph_name")), ("dataset", s.get("dataset")),
        ("split", s.get("split")), ("workers", s.get("worker_count")),
        ("executor", snap.executor), ("started", when(s.get("started_at"))),
        ("finished", when(s.get("finished_at"))),
        ("took", duration(s.get("elapsed_sec"), words=True)),
        ("episodes", f"{finished} of {total}" if isinstance(total, int) else str(finished)),
        ("by status", ", ".join(f"{k} {v}" for k, v in counts.items()) or None),
        ("policy server", _server_latency(snap.run_dir)),
    ]


def _server_latency(run_dir: Path) -> str | None:
    """A policy served elsewhere (evaltui.nodesets): its per-step round trip."""
    latency = read_latency(run_dir)
    if latency is None:
        return None
    return (f"p50 {latency['p50_ms']:g} ms, p99 {latency['p99_ms']:g} ms over "
            f"{latency['steps']} requests")


def metrics_table(snap: RunSnapshot) -> str:
    lines = snap.metrics()
    if not lines:
        return '<p class="empty">no metrics yet</p>'
    ok_col = snap.error_count > 0
    head = ("<tr><th>metric</th><th>mean</th><th>95% CI</th><th>n</th>"
            + ("<th>ok only</th>" if ok_col else "") + "</tr>")
    body = []
    for m in lines:
        ci = (f'<td class="ci" data-lo="{value_attr(m.ci95[0])}" data-hi="{value_attr(m.ci95[1])}">'
              f"[{number(m.ci95[0])}, {number(m.ci95[1])}]</td>") if m.ci95 else \
            '<td class="ci">-</td>'
        cells = (f'<th scope="row">{esc(m.name)}</th>'
                 f'<td class="mean" data-value="{value_attr(m.mean)}">{number(m.mean)}</td>'
                 f'{ci}<td class="n">{"-" if m.n is None else m.n}</td>')
        if ok_col:
            cells += f'<td class="ok-only">{number(m.ok_only)}</td>'
        body.append(f'<tr data-metric="{esc(m.name)}">{cells}</tr>')
    return (f'<table id="metrics" class="metrics"><thead>{head}</thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def episode_table_data(snap: RunSnapshot, pages: Collection[int]) -> dict[str, Any]:
    """The episode table as columns + rows of arrays, and which rows have a page."""
    names = snap.metric_names()
    rows = []
    for row in snap.rows:
        metrics = row.get("metrics") or {}
        error = row.get("error")
        if isinstance(error, str) and error.strip():
            error = error.strip().splitlines()[-1][:ERROR_CHARS]
        else:
            error = None
        rows.append([row.get("episode_index"), _text(row.get("episode_id")),
                     row.get("status"), _text(row.get("instruction")), row.get("step_count"),
                     _round(row.get("elapsed_sec"), 3), error,
                     *(_round(metrics.get(n), 6) for n in names)])
    statuses = sorted({str(r.get("status")) for r in snap.rows})
    return {"columns": [*BASE_COLUMNS, *names], "metrics": names, "statuses": statuses,
            "pages": sorted(pages), "rows": rows}


def write_run_page(snap: RunSnapshot, dest: Path, pages: Collection[int], *,
                   root: str = "") -> None:
    """index.html, data/episodes.js and plots/*.svg of one run under ``dest``."""
    (dest / DATA_DIR).mkdir(parents=True, exist_ok=True)
    (dest / DATA_DIR / EPISODES_JS).write_bytes(
        js_data("EVALTUI_EPISODES", episode_table_data(snap, pages)))
    (dest / PLOTS_DIR).mkdir(exist_ok=True)
    means_svg = running_means_svg(snap.running_means())
    steps_svg = steps_histogram_svg(snap.steps())
    (dest / PLOTS_DIR / "running_means.svg").write_text(means_svg)
    (dest / PLOTS_DIR / "steps.svg").write_text(steps_svg)
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in snap.notes())
    state = snap.state.value
    badge = f'<span id="run-state" class="state state-{esc(state)}">{esc(state)}</span>'
    body = f"""<header class="run">
<h1>Run {esc(snap.run_id)} {badge}</h1>
{definition_list(header_items(snap), "run-header")}
</header>
<main>
<section id="notes">{notes}</section>
<section><h2>Metrics</h2>
<p class="hint">Mean over every scored episode (ok, error, timeout), with its Student-t
95% CI and n; numbers from {esc(snap.numbers_from)}.</p>
{metrics_table(snap)}
</section>
{groups_section(snap.summary, snap.rows)}
<section id="plots"><h2>Plots</h2>
<figure>{means_svg}<figcaption><a href="{PLOTS_DIR}/running_means.svg">running_means.svg</a>
</figcaption></figure>
<figure>{steps_svg}<figcaption><a href="{PLOTS_DIR}/steps.svg">steps.svg</a></figcaption>
</figure>
</section>
<section><h2>Episodes</h2>
<div class="controls">
<input id="search" type="search" placeholder="search id or instruction" aria-label="search">
<select id="status-filter" aria-label="status"><option value="">all statuses</option></select>
<span id="shown-count"></span>
</div>
<div class="scroll"><table id="episodes" class="episodes"><thead></thead><tbody></tbody>
</table></div>
<nav id="pager" class="pager"></nav>
<noscript><p>The episode table needs JavaScript.</p></noscript>
</section>
</main>"""
    html = page(f"evaltui report: run {snap.run_id}", body, root=root,
                data_scripts=[f"{DATA_DIR}/{EPISODES_JS}"])
    (dest / "index.html").write_text(html)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _round(value: Any, digits: int) -> Any:
    if isinstance(value, float):
        return round(value, digits) if math.isfinite(value) else None
    return value
