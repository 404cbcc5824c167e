"""The report's metrics by group: a run of a benchmark that groups by default (Meta-World:
by task) gets a table of each group's mean [95% CI] and n under its metrics table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaltui.report.html import esc, number, value_attr
from evaltui.results.groups import OVERALL, default_groups, metric_names


def groups_section(summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    """``<section id="by-group">`` with the table, or "" when the run is not grouped."""
    found = default_groups(summary, list(rows))
    if found is None:
        return ""
    field, groups = found
    names = metric_names(groups)
    head = (f"<tr><th>{esc(field)}</th><th>n</th>"
            + "".join(f"<th>{esc(n)}</th>" for n in names) + "</tr>")
    body = []
    for g in groups:
        cells = [f'<th scope="row">{esc(g.key)}</th><td class="n">{g.episodes}</td>']
        for name in names:
            mean, ci = g.stats.means.get(name), g.stats.ci95.get(name)
            text = number(mean) + (f" [{number(ci[0])}, {number(ci[1])}]" if ci else "")
            cells.append(f'<td data-metric="{esc(name)}" data-value="{value_attr(mean)}">'
                         f"{text}</td>")
        cls = ' class="overall"' if g.key == OVERALL else ""
        body.append(f'<tr data-group="{esc(g.key)}"{cls}>{"".join(cells)}</tr>')
    return (f'<section id="by-group"><h2>By {esc(field)}</h2><p class="hint">Mean [95% CI] '
            f"per {esc(field)}; '{OVERALL}' is over every episode.</p>"
            f'<div class="scroll"><table id="groups" class="metrics"><thead>{head}</thead>'
            f'<tbody>{"".join(body)}</tbody></table></div></section>')
