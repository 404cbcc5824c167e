"""The run screen's running-mean plots show the headline metrics the episodes have: a
Meta-World run (success, return; no paths) got empty SPL and nDTW plots beside SR."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from evaltui.runview.running_mean import RunningMeans
from evaltui.tui.widgets.running_mean_chart import RunningMeanChart

pytestmark = pytest.mark.anyio


def rows(metrics: dict[str, float], n: int = 6) -> list[dict]:
    return [{"episode_index": i, "status": "ok", "step_count": 10 + i,
             "finished_at": f"2026-12-02T00:00:{i:02d}", "metrics": dict(metrics)}
            for i in range(n)]


class ChartApp(App[None]):
    def __init__(self, means: RunningMeans) -> None:
        super().__init__()
        self.means = means

    def compose(self) -> ComposeResult:
        yield RunningMeanChart(self.means)


async def plot_titles(metrics: dict[str, float]) -> str:
    means = RunningMeans()
    means.update(rows(metrics))
    app = ChartApp(means)
    async with app.run_test(size=(120, 12)) as pilot:
        await pilot.pause()
        strips = app.screen._compositor.render_strips()
        return "".join(s.text for s in strips[0])


async def test_a_run_without_path_metrics_plots_success_alone() -> None:
    first_line = await plot_titles({"success": 1.0, "return": 12.5})
    assert "SR 1.000" in first_line
    assert "SPL" not in first_line and "nDTW" not in first_line


async def test_a_run_with_path_metrics_plots_all_three() -> None:
    first_line = await plot_titles({"success": 1.0, "spl": 0.5, "ndtw": 0.25})
    assert "SR 1.000" in first_line and "SPL 0.500" in first_line and "nDTW 0.250" in first_line
