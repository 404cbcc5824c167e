"""The run screen over live fixture run dirs: new episodes, filters, sort, bad files."""

from __future__ import annotations

import time

import pytest
from runfixtures import write_episode
from tuihelpers import SIZE, wait_for

from evaltui.rundir.layout import episode_dir
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.screens.run import RunScreen
from evaltui.tui.widgets.episodes_table import EpisodesTable
from evaltui.tui.widgets.metrics_panel import MetricsPanel

pytestmark = pytest.mark.anyio


def table(app) -> EpisodesTable:
    return app.screen.query_one(EpisodesTable)


async def loaded(app, rows: int) -> None:
    await wait_for(lambda: isinstance(app.screen, RunScreen) and table(app).row_count == rows,
                   what=f"{rows} rows")


async def test_new_episode_json_shows_as_a_row_within_a_second(runs, app_factory) -> None:
    run_dir = runs["running"]
    app = app_factory(run_dir=run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, 12)
        await pilot.pause(0.6)  # the watch is in place
        for index in (12, 13):
            started = time.monotonic()
            write_episode(run_dir, index)
            await wait_for(lambda i=index: table(app).row_data(i) is not None, timeout=1.0,
                           what=f"episode {index} as a row within 1 s")
            assert time.monotonic() - started < 1.0
        assert table(app).row_count == 14
        assert app.screen.query_one("#table-caption").render() is not None


async def test_selection_is_kept_while_rows_arrive(runs, app_factory) -> None:
    run_dir = runs["running"]
    app = app_factory(run_dir=run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, 12)
        t = table(app)
        t.move_cursor(row=4)
        await pilot.press("o", "o", "o", "o")  # sort by SPL
        assert t.sort_column == "spl"
        selected = t.selected_index()
        write_episode(run_dir, 12)
        await wait_for(lambda: t.row_count == 13)
        assert t.selected_index() == selected


async def test_status_and_text_filters(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, 12)
        await pilot.press("f")  # all -> not-ok
        assert table(app).status_filter == "not-ok"
        assert {table(app).row_data(i)["status"] for i in (5, 9)} == {"error", "timeout"}
        assert table(app).row_count == 2
        await pilot.press("f", "f")  # ok -> error
        assert table(app).status_filter == "error" and table(app).row_count == 1
        await pilot.press("f", "f", "f")  # timeout, cancelled, all
        assert table(app).status_filter == "all"
        await pilot.press("slash", *"blue key")
        assert table(app).row_count == 3  # episodes 1, 6, 11
        await pilot.press("enter")  # leave the box, keep the filter
        assert table(app).row_count == 3
        await pilot.press("slash", "ctrl+u")
        assert table(app).row_count == 12


async def test_sort_reverse_by_index(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, 12)
        await pilot.press("r")
        first = table(app).coordinate_to_cell_key((0, 0)).row_key.value
        assert first == "11"


async def test_corrupt_episode_json_is_badged_then_repaired(runs, app_factory) -> None:
    run_dir = runs["running"]
    app = app_factory(run_dir=run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, 12)
        await pilot.pause(0.6)
        bad = episode_dir(run_dir, 3) / "episode.json"
        good = bad.read_bytes()
        bad.write_text("{not json")
        screen = app.screen
        await wait_for(lambda: "ep0003/episode.json" in " ".join(screen._errors),
                       what="the badge")
        write_episode(run_dir, 12)  # the screen keeps following the run
        await wait_for(lambda: table(app).row_count == 13)
        bad.write_bytes(good)
        await wait_for(lambda: not screen._errors, what="the badge to clear")


async def test_enter_opens_the_episode_replay(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["done"])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, 20)
        await wait_for(lambda: app.screen.query_one(MetricsPanel).summary is not None)
        table(app).move_cursor(row=5)
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, ReplayScreen))
        assert app.screen.ep_dir == episode_dir(runs["done"], 5)
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, RunScreen))


async def test_a_torn_summary_shows_rebuilt_metrics_and_says_so(runs, app_factory) -> None:
    """A torn summary.json (with _DONE) shows the run's state and its rebuilt metrics."""
    run_dir = runs["done"]
    summary = run_dir / "summary.json"
    summary.write_bytes(summary.read_bytes()[:200])
    app = app_factory(run_dir=run_dir)
    async with app.run_test(size=SIZE):
        await loaded(app, 20)
        screen = app.screen
        await wait_for(lambda: "summary" in screen._errors, what="the unreadable note")
        assert "rows and metrics rebuilt" in screen._errors["summary"]
        assert screen._state is not None and screen._state.value == "done"
        panel = screen.query_one(MetricsPanel)
        assert (panel.summary or {}).get("metrics", {}).get("success") is not None
        assert "no metrics yet" not in str(panel.render())
