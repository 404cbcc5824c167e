"""What a new user reads at 80x24 (and wider): whole episode ids, a failed run's cause
instead of its traceback, waiting reasons with room, bars that grow, a form that scrolls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from runfixtures import write_record, write_summary
from textual.widgets import Button
from tuihelpers import wait_for

from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.tui.screens.submit import SubmitScreen
from evaltui.tui.widgets.episodes_table import EpisodesTable
from evaltui.tui.widgets.metrics_panel import MetricsPanel
from evaltui.tui.widgets.queue_lines import RunDetail
from evaltui.tui.widgets.runs_table import RunsTable

pytestmark = pytest.mark.anyio

TRACEBACK_ERROR = (
    "workers cannot start: Traceback (most recent call last):\n"
    '  File "/src/evaltui/engine/worker.py", line 88, in start\n'
    "    nodeset = cls(**params)\n"
    '  File "/src/mypolicy.py", line 12, in __init__\n'
    "    raise ValueError(f'noise={noise} is above its bound 1')\n"
    "ValueError: noise=5 is above its bound 1")
CAUSE = "workers cannot start: ValueError: noise=5 is above its bound 1"


def long_ids_run(done: Path) -> Path:
    """A copy of the done run whose episode ids are as long as GoToObjMaze's."""
    run = done.parent / "20260115_091100"
    shutil.copytree(done, run)
    rows = json.loads((run / "summary.json").read_text())["episodes"]
    for row in rows:
        row["episode_id"] = f"GoToObjMaze-{row['episode_index']:04d}"
        row["run_id"] = run.name
        write_json_atomic(run / "episodes" / f"ep{row['episode_index']:04d}" / "episode.json",
                          row)
    write_summary(run, rows, status="done", total=20)
    return run


def traceback_run(failed: Path) -> Path:
    """A run that failed at start with a worker's traceback as its error."""
    run = failed.parent / "20260115_091200"
    shutil.copytree(failed, run)
    write_summary(run, [], status="failed", total=20, error=TRACEBACK_ERROR)
    write_record(run, state="failed", admitted_at=None, pid=4_000_000, pid_create_time=1.0,
                 exit_code=1)
    return run


async def test_episode_ids_are_whole_at_80_columns(runs, app_factory) -> None:
    app = app_factory(run_dir=long_ids_run(runs["done"]))
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.screen.query_one(EpisodesTable)
        await wait_for(lambda: table.row_count == 20, what="episode rows")
        await pilot.pause()
        assert table.columns["episode"].width >= len("GoToObjMaze-0000")  # type: ignore[index]
        shot = app.export_screenshot()
        assert "GoToObjMaze-0003" in shot.replace("&#160;", " ")
        assert {"index", "status", "success"} <= set(table.visible_columns)


async def test_a_failed_run_shows_its_cause_not_its_traceback(runs, app_factory) -> None:
    app = app_factory(run_dir=traceback_run(runs["failed"]))
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.screen.query_one(MetricsPanel)
        await wait_for(lambda: panel.summary is not None, what="the summary")
        await pilot.pause()
        header = " ".join(str(app.screen.query_one(f"#run-{part}").content)
                          for part in ("header", "error"))
        assert CAUSE in header and "Traceback" not in header and "File " not in header
        metrics = str(panel.render())
        assert "no metrics yet" not in metrics and "failed" in metrics


async def test_the_detail_pane_shows_a_tracebacks_cause(runs, make_backend,
                                                        app_factory) -> None:
    run = traceback_run(runs["failed"])
    app = app_factory(make_backend())
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.screen.query_one(RunsTable)
        await wait_for(lambda: table.run(run.name) is not None, what="the failed run")
        table.move_cursor(row=table.get_row_index(run.name))
        await pilot.pause()
        detail = str(app.screen.query_one(RunDetail).content)
        assert CAUSE in detail and "most recent call" not in detail


async def test_the_waiting_reason_gets_room_at_120_columns(runs, make_backend,
                                                           app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.screen.query_one(RunsTable)
        await wait_for(lambda: table.row_count == 9, what="runs")
        await pilot.pause()
        assert "run_id" in table.column_keys  # the id stays: it tells the runs apart
        assert table.columns["why"].width >= 48  # type: ignore[index]


async def test_progress_bars_grow_with_the_width(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=(200, 50)) as pilot:
        table = app.screen.query_one(RunsTable)
        await wait_for(lambda: table.row_count == 9, what="runs")
        await pilot.pause()
        cell = table.get_cell(runs["running"].name, "progress")
        bar = cell.plain.split(" ")[0]
        assert len(bar) >= 10, cell.plain


async def test_tab_reaches_the_submit_button_at_80x24(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: app.screen.query_one(RunsTable).row_count == 9, what="runs")
        await pilot.press("s")
        await wait_for(lambda: isinstance(app.screen, SubmitScreen), what="the form")
        button = app.screen.query_one("#submit", Button)
        for _ in range(20):
            if button.has_focus:
                break
            await pilot.press("tab")
        assert button.has_focus
        await pilot.pause()
        await pilot.pause()
        region = button.region
        under, _ = app.screen.get_widget_at(region.x + 2, region.y + 1)
        assert under is button, f"the focused Submit button is hidden under {under}"
        assert region.bottom <= 23  # above the form's own footer
