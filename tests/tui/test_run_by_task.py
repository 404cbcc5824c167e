"""The run screen of a Meta-World run breaks its success down by task under the metrics
(the benchmark's default ``--by``); a BabyAI run has no such table."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from test_run_pilot import loaded
from tuihelpers import SIZE, wait_for

from evaltui.tui.widgets.metrics_panel import MetricsPanel

pytestmark = pytest.mark.anyio


def _as_metaworld(run_dir) -> None:
    """The fixture run's rows relabelled as two Meta-World tasks (summary.json only: what
    the run screen reads its summary from)."""
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text())
    summary["dataset"], summary["split"] = "metaworld", "MT10"
    for row in summary["episodes"]:
        row["task"] = ("reach-v3", "push-v3")[row["episode_index"] % 2]
    path.write_text(json.dumps(summary))


async def test_a_metaworld_run_shows_success_by_task(runs, app_factory) -> None:
    run_dir = runs["done"]
    _as_metaworld(run_dir)
    app = app_factory(run_dir=run_dir)
    async with app.run_test(size=SIZE):
        await loaded(app, 20)
        panel = app.screen.query_one(MetricsPanel)
        await wait_for(lambda: panel.groups is not None, what="groups")
        field, groups = panel.groups
        assert field == "task"
        assert [g.key for g in groups] == ["reach-v3", "push-v3", "all"]
        assert [g.episodes for g in groups] == [10, 10, 20]
        console = Console(width=80, record=True, file=io.StringIO())
        console.print(panel.render())
        text = console.export_text()
        assert "reach-v3" in text and "push-v3" in text and "all" in text


async def test_a_babyai_run_has_no_group_table(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["done"])
    async with app.run_test(size=SIZE):
        await loaded(app, 20)
        panel = app.screen.query_one(MetricsPanel)
        await wait_for(lambda: panel.summary is not None, what="summary")
        assert panel.groups is None
