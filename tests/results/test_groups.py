"""Metrics by group (``--by``): per-group aggregates equal the engine's aggregate of the
group's rows, errors count as failures, the overall row is over every episode, and the
md/csv/latex writers carry the group column."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from evaltui.results.groups import (
    OVERALL,
    GroupByError,
    group_by_field,
    groups_json,
    metric_groups,
)
from evaltui.results.tables import grouped_table


def _rows() -> list[dict]:
    rows = []
    for i, (task, success, ret) in enumerate([("reach", 1, 10.0), ("push", 0, 2.0),
                                               ("reach", 1, 12.0), ("push", 1, 6.0),
                                               ("reach", 0, 3.0)]):
        rows.append({"episode_index": i, "task": task, "status": "ok",
                     "metrics": {"success": float(success), "return": ret}})
    rows.append({"episode_index": 5, "task": "push", "status": "error",
                 "metrics": {"success": 1.0, "return": 9.0}})  # an error is a failure
    return rows


def test_each_group_and_the_overall_row_aggregate_their_own_rows() -> None:
    groups = metric_groups(_rows(), "task")
    assert [g.key for g in groups] == ["reach", "push", OVERALL]
    reach, push, overall = groups
    assert reach.stats.means["success"] == pytest.approx(2 / 3)
    assert push.stats.means["success"] == pytest.approx(1 / 3)  # 0, 1 and the error's 0
    assert push.stats.means["return"] == pytest.approx(np.mean([2.0, 6.0, 9.0]))
    assert overall.stats.n["success"] == 6 and overall.episodes == 6
    assert overall.stats.means["success"] == pytest.approx(3 / 6)
    lo, hi = reach.stats.ci95["return"]
    assert lo < reach.stats.means["return"] < hi


def test_an_unknown_field_is_an_error_and_none_turns_grouping_off() -> None:
    with pytest.raises(GroupByError, match="--by nope"):
        metric_groups(_rows(), "nope")
    assert group_by_field("none", "metaworld") is None
    assert group_by_field(None, "metaworld") == "task"
    assert group_by_field(None, "babyai") is None
    assert group_by_field("scene_id", "babyai") == "scene_id"


def test_the_table_writers_carry_the_group_column() -> None:
    groups = metric_groups(_rows(), "task")
    parsed = list(csv.reader(io.StringIO(grouped_table("task", groups, fmt="csv"))))
    assert parsed[0] == ["task", "metric", "mean", "ci_low", "ci_high", "n"]
    assert len(parsed) == 1 + 3 * 2
    assert parsed[-2][:3] == [OVERALL, "success", "0.500"]
    md = grouped_table("task", groups, fmt="md").splitlines()
    assert md[0] == "| task | metric | mean | 95% CI | n |"
    assert md[1] == "|:---|:---|---:|---:|---:|"
    latex = grouped_table("task", groups, fmt="latex")
    assert latex.startswith(r"\begin{tabular}{llrrr}")
    assert groups_json("task", groups)["groups"][-1]["key"] == OVERALL
