"""Metrics by group (``--by FIELD``): a run's episode rows broken down by a row field.

Each group's mean, Student-t 95% CI and n come from the engine's own aggregation
(:func:`evaltui.engine.episode.metrics.aggregate`: errors and timeouts count as failures,
exactly as in the run's summary), and so does the overall row, over every episode: with
as many episodes in each group (Meta-World's MT10/MT50) it equals the mean of the group
means papers report. A row without the field falls in the group ``-``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaltui.engine.episode.metrics import Aggregate, aggregate
from evaltui.engine.graph.benchmarks import default_group_by

NO_VALUE = "-"
OVERALL = "all"
NO_GROUPS = "none"
"""``--by none``: the overall table only, even for a benchmark that groups by default."""


class GroupByError(ValueError):
    """``--by`` names a field no row has (exit 2)."""


@dataclass(frozen=True)
class MetricGroup:
    """One group's aggregate (``key`` is the field's value as text, or :data:`OVERALL`)."""

    key: str
    stats: Aggregate
    episodes: int


def _row_dict(row: Any) -> Mapping[str, Any]:
    return row.model_dump(mode="json") if hasattr(row, "model_dump") else row


def group_by_field(by: str | None, dataset: str | None) -> str | None:
    """The field to group by: ``--by`` if given (``none``: no grouping), else the
    benchmark's default (Meta-World: ``task``), else none."""
    if by == NO_GROUPS:
        return None
    return by or default_group_by(dataset)


def metric_groups(rows: Iterable[Any], field: str) -> list[MetricGroup]:
    """The groups of ``rows`` by ``field`` in order of first appearance, then the overall
    group; GroupByError when no row has the field."""
    dicts = [_row_dict(r) for r in rows]
    if dicts and not any(d.get(field) is not None for d in dicts):
        known = sorted({k for d in dicts for k, v in d.items()
                        if v is not None and not isinstance(v, dict | list)})
        raise GroupByError(f"--by {field}: no episode row has it (fields: {', '.join(known)})")
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for d in dicts:
        value = d.get(field)
        groups.setdefault(NO_VALUE if value is None else str(value), []).append(d)
    out = [MetricGroup(key, aggregate(members), len(members)) for key, members in groups.items()]
    out.append(MetricGroup(OVERALL, aggregate(dicts), len(dicts)))
    return out


def default_groups(summary: Mapping[str, Any], rows: Any
                   ) -> tuple[str, list[MetricGroup]] | None:
    """A run's rows by its benchmark's default field (Meta-World: task), or None: the
    benchmark does not group, there are no rows, or no row has the field."""
    field = group_by_field(None, summary.get("dataset"))
    if not field or not isinstance(rows, list) or not rows:
        return None
    try:
        return field, metric_groups(rows, field)
    except GroupByError:
        return None


def metric_names(groups: Sequence[MetricGroup]) -> list[str]:
    """Every metric any group has, in the order they first appear."""
    return list(dict.fromkeys(name for g in groups for name in g.stats.means))


def groups_json(field: str, groups: Sequence[MetricGroup]) -> dict[str, Any]:
    """``--json``'s form: ``{"by": field, "groups": [{key, episodes, metrics,
    metrics_ci95, metrics_n}, ...]}``, the overall group last (key ``all``)."""
    return {"by": field, "groups": [
        {"key": g.key, "episodes": g.episodes, "metrics": g.stats.means,
         "metrics_ci95": g.stats.ci95, "metrics_n": g.stats.n} for g in groups]}
