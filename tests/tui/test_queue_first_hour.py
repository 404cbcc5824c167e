"""The queue at 80x24 as a new user met it (issue 35, item 9): a run-id column to tell
same-named runs apart, the demo's header whole, the run screen's metric line whole, and
a cancel dialog whose count follows the run instead of the moment it opened."""

from __future__ import annotations

import json

import pytest
from textual.widgets import Static
from tuihelpers import queue_ready, runs_table, select_run, wait_for

from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.tui.screens.confirm import ConfirmScreen
from evaltui.tui.screens.run import RunScreen
from evaltui.tui.widgets.metrics_panel import MetricsPanel
from evaltui.tui.widgets.queue_lines import SchedulerHeader

pytestmark = pytest.mark.anyio


async def test_the_run_id_column_shows_at_80_columns(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=(80, 24)):
        await queue_ready(app)
        table = runs_table(app)
        assert "run_id" in table.column_keys
        assert table.columns["run_id"].width >= 15  # type: ignore[index]


async def test_the_demo_header_keeps_its_note_and_api_at_80_columns(
        runs, make_backend, app_factory) -> None:
    backend = make_backend()
    backend.api_note = "demo: fake GPU · API: 127.0.0.1:8000"
    app = app_factory(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await queue_ready(app)
        await pilot.pause()
        line = str(app.screen.query_one(SchedulerHeader).render())
        assert line.endswith("API: 127.0.0.1:8000"), line
        assert len(line) <= 80


async def test_the_run_screens_metric_line_is_whole_at_80x24(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: isinstance(app.screen, RunScreen)
                       and app.screen.query_one(MetricsPanel).summary is not None,
                       what="the run's metrics")
        await pilot.pause()
        panel = app.screen.query_one(MetricsPanel)
        assert panel.collapsed
        text = str(panel.render())
        for name in ("SR ", "SPL ", "nDTW ", "SDTW ", "err/timeout"):
            assert name in text, text
        assert "…" not in text
        assert all(len(line) <= panel.content_region.width for line in text.splitlines())
        assert panel.size.height == len(text.splitlines())


async def test_the_cancel_dialog_counts_what_the_queue_counts(
        runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend(), poll_interval=0.2)
    run = runs["running"]
    async with app.run_test(size=(120, 36)) as pilot:
        await queue_ready(app)
        await select_run(pilot, run.name)
        await pilot.press("c")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen), what="the dialog")
        detail = app.screen.query_one("#confirm-detail", Static)
        assert "(12/40 episodes)" in str(detail.render())
        summary = json.loads((run / "summary.json").read_text())
        summary["episodes_finished"] = 30
        write_json_atomic(run / "summary.json", summary)
        await wait_for(lambda: "(30/40 episodes)" in str(detail.render()), timeout=10,
                       what="the dialog to follow the poll")
        await pilot.press("n")
