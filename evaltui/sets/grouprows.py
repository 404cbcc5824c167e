"""A set's table by group (``set show --by FIELD``): each member's row becomes one row per
value of an episode-row field (Meta-World's ``task``) plus its overall row (``all``).

The field becomes one more axis of the table, so every renderer shows it as a column and
``--pivot FIELD`` spreads the groups over the columns. The groups' means, CIs and n come
from :func:`evaltui.results.groups.metric_groups` over the member's summary.json rows,
as ``show --by`` computes them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from evaltui.results.groups import GroupByError, group_by_field, metric_groups
from evaltui.rundir.summaryfile import read_summary
from evaltui.sets.table import MemberRow, SetTable


def _summary(row: MemberRow) -> dict[str, Any] | None:
    return None if row.run_dir is None else read_summary(row.run_dir)


def set_group_field(table: SetTable, by: str | None) -> str | None:
    """``--by`` (``none``: no groups), else the benchmark's default when every member with
    a summary ran on the same dataset."""
    datasets = {s.get("dataset") for s in map(_summary, table.rows) if s is not None}
    return group_by_field(by, datasets.pop() if len(datasets) == 1 else None)


def group_table(table: SetTable, field: str, *, asked: bool) -> SetTable:
    """``table`` with each member split by ``field``; GroupByError when ``asked`` (``--by``
    given) and no member's rows have the field, else the table unchanged."""
    if field in table.axes:
        raise GroupByError(f"--by {field}: already an axis of the set")
    rows: list[MemberRow] = []
    found = False
    for row in table.rows:
        summary = _summary(row)
        episodes = (summary or {}).get("episodes") or []
        try:
            groups = metric_groups(episodes, field) if episodes else []
        except GroupByError:
            groups = []
        found = found or bool(groups)
        if not groups:
            rows.append(replace(row, axes={**row.axes, field: None}))
            continue
        for g in groups:
            rows.append(replace(row, key=f"{row.key}/{g.key}", axes={**row.axes, field: g.key},
                                metrics=dict(g.stats.means), metrics_ci95=dict(g.stats.ci95),
                                metrics_n=dict(g.stats.n)))
    if not found:
        if asked:
            raise GroupByError(f"--by {field}: no episode row of the set's runs has it")
        return table
    return replace(table, axes=[*table.axes, field], rows=rows, best={})
