"""The ``--by task`` table at 80 columns: a Meta-World run's five metrics fold between a
mean and its interval, never inside a number (``201.04`` over ``8`` before)."""

from __future__ import annotations

import re

from rich.console import Console

from evaltui.results.groups import metric_groups
from evaltui.results.tables import grouped_metrics_table

TASKS = ["reach-v3", "push-v3", "pick-place-v3", "door-open-v3", "button-press-topdown-v3"]


def meta_world_rows() -> list[dict]:
    rows = []
    for i in range(20):
        rows.append({"episode_index": i, "status": "ok", "task": TASKS[i % len(TASKS)],
                     "metrics": {"success": 1.0, "path_length": 0.3 + 0.07 * i,
                                 "nav_error": 0.01 * (i % 7), "return": 95.4 + 13.37 * i,
                                 "steps_to_success": 52.0 + 3 * (i % 11)}})
    return rows


def test_the_by_task_table_fits_80_columns_with_every_number_whole() -> None:
    console = Console(width=80, record=True, color_system=None)
    console.print(grouped_metrics_table("task", metric_groups(meta_world_rows(), "task")))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    # a number cut across two lines leaves a cell that is only digits after a number
    # cut at its decimal point, or a lone digit run where a CI's bracket should be
    for line in text.splitlines():
        for cell in line.split("│")[3:]:
            cell = cell.strip()
            assert not re.fullmatch(r"[0-9]{1,2}\]?|[0-9]*\.|,", cell), (cell, line)
