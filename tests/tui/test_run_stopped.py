"""The run screen of a stopped run names its two intervals: the stop rule, "stopped at
n=...", the confidence sequence beside the Student-t interval."""

from __future__ import annotations

import pytest
from test_run_layout import opened, screen_lines

from evaltui.rundir.jsonfiles import read_json, write_json_atomic
from evaltui.tui.widgets.metrics_panel import MetricsPanel

pytestmark = pytest.mark.anyio

STOPPED = {"rule": "success:width<=0.3", "n": 12, "metric": "success",
           "interval": [0.41, 0.7], "full_n": 200, "met_at": 11, "decision": None,
           "method": "betting confidence sequence (hedged capital, without replacement), 95%"}


def _stop(run_dir) -> None:
    summary = read_json(run_dir / "summary.json")
    write_json_atomic(run_dir / "summary.json", {**summary, "stopped": STOPPED})


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
async def test_the_run_screen_shows_the_stop_and_the_cs_beside_the_t_interval(
        runs, app_factory, size) -> None:
    _stop(runs["running"])
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=size) as pilot:
        screen = await opened(app)
        panel = screen.query_one(MetricsPanel)
        if panel.collapsed:
            line = next(x for x in screen_lines(app) if "SR " in x)
            assert "SR 0.583 [.48,.68] n=12 · stopped, CS [.41,.70]" in line
            await pilot.press("m")
        await pilot.pause()
        shown = "\n".join(screen_lines(app))
        assert "95% CI (t)" in shown and "95% CS" in shown and "[.41,.70]" in shown
        assert "stopped at n=12 of 200 by success:width<=0.3" in shown
