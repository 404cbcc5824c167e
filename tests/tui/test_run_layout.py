"""The run screen at the sizes people use: rows that fit, CIs on one line, enter only on
a row that can be seen, plots toggled, wide screens using their width."""

from __future__ import annotations

import pytest
from tuihelpers import wait_for

from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.screens.run import RunScreen
from evaltui.tui.widgets.episodes_table import COLUMNS, SCROLLBAR, EpisodesTable, fit_columns
from evaltui.tui.widgets.metrics_panel import MetricsPanel, compact_interval
from evaltui.tui.widgets.running_mean_chart import RunningMeanChart
from evaltui.tui.widgets.steps_histogram import StepsHistogram

pytestmark = pytest.mark.anyio


async def opened(app, rows: int = 12) -> RunScreen:
    await wait_for(lambda: isinstance(app.screen, RunScreen)
                   and app.screen.query_one(EpisodesTable).row_count == rows
                   and app.screen.query_one(MetricsPanel).summary is not None,
                   what=f"{rows} rows and the summary")
    return app.screen


def rows_on_screen(table: EpisodesTable) -> int:
    """Data rows the table's viewport draws (its height less the header)."""
    return max(0, min(table.row_count, table.scrollable_content_region.height
                      - table.header_height))


def screen_lines(app) -> list[str]:
    """What the terminal shows, line by line (the text of every cell)."""
    return ["".join(s.text for s in strip) for strip in app.screen._compositor.render_strips()]


async def test_80x24_shows_ten_rows_and_every_headline_metric_whole(runs,
                                                                   app_factory) -> None:
    """Ten rows, and SR, SPL, nDTW, SDTW and the errors note whole on at most two lines
    (one line stopped at ``SDT…``)."""
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app)
        await pilot.pause()
        assert rows_on_screen(screen.query_one(EpisodesTable)) >= 10
        panel = screen.query_one(MetricsPanel)
        assert panel.region.height <= 2
        summary = panel.summary
        lines = screen_lines(app)[panel.region.y:panel.region.y + panel.region.height]
        shown = " ".join(lines)
        assert "…" not in shown
        for name, label in (("success", "SR"), ("spl", "SPL"), ("ndtw", "nDTW"),
                            ("sdtw", "SDTW")):
            assert f"{label} {summary['metrics'][name]:.3f} " \
                   f"{compact_interval(summary['metrics_ci95'][name])}" in shown
        assert f"{summary['error_count']} err/timeout = fail" in shown


@pytest.mark.parametrize("size", [(80, 24), (120, 36), (200, 50)])
async def test_a_ci_never_wraps(runs, app_factory, size) -> None:
    """The full table (``m`` at 80x24) is one line per metric, plus the errors note."""
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=size) as pilot:
        screen = await opened(app)
        panel = screen.query_one(MetricsPanel)
        if panel.collapsed:
            await pilot.press("m")
        await pilot.pause()
        assert not panel.collapsed
        summary = panel.summary
        lines = 1 + len(summary["metrics"]) + (1 if summary["error_count"] else 0)
        assert panel.region.height == lines
        shown = "\n".join(screen_lines(app))
        for ci in summary["metrics_ci95"].values():
            assert compact_interval(ci) in shown


async def test_enter_at_60x20_opens_the_highlighted_visible_row(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=(60, 20)) as pilot:
        screen = await opened(app)
        table = screen.query_one(EpisodesTable)
        table.focus()
        table.move_cursor(row=3)
        await pilot.pause()
        assert rows_on_screen(table) >= 4 and table.cursor_on_screen()
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, ReplayScreen), what="replay")
        assert app.screen.ep_dir.name == "ep0003"


async def test_enter_never_opens_a_row_scrolled_out_of_sight(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=(60, 20)) as pilot:
        screen = await opened(app)
        table = screen.query_one(EpisodesTable)
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("p")  # the plots leave the table a few rows
        await pilot.pause()
        assert 0 < rows_on_screen(table) < table.row_count
        table.scroll_to(y=table.max_scroll_y, animate=False)
        await pilot.pause()
        assert not table.cursor_on_screen()
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.screen is screen  # nothing opened: the row is brought into view
        assert table.cursor_on_screen()
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, ReplayScreen), what="replay")
        assert app.screen.ep_dir.name == "ep0000"


async def test_plots_show_on_tall_screens_and_toggle_on_small_ones(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app)
        chart = screen.query_one(RunningMeanChart)
        assert not chart.display or chart.region.height == 0
        await pilot.press("p")
        await pilot.pause()
        assert chart.region.height > 0 and screen.query_one(StepsHistogram).region.height > 0
        assert any("⠀" < ch <= "⣿" for line in screen_lines(app) for ch in line)  # braille
        await pilot.press("p")
        await pilot.pause()
        assert chart.region.height == 0
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app)
        await pilot.pause()
        assert screen.query_one(RunningMeanChart).region.height > 0
        assert rows_on_screen(screen.query_one(EpisodesTable)) >= 10


async def test_a_wide_screen_widens_names_and_shows_the_scene(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=(200, 50)) as pilot:
        screen = await opened(app)
        await pilot.pause()
        table = screen.query_one(EpisodesTable)
        assert "scene" in table.visible_columns
        widths = {str(k.value): c.width for k, c in table.columns.items()}
        assert widths["episode"] >= 24 and widths["scene"] >= 26 and widths["detail"] >= 40
        used = sum(c.get_render_width(table) for c in table.columns.values())
        assert used >= 200 - SCROLLBAR - 2  # no band of empty columns on the right
        assert any("BabyAI-GoToLocal-v0:seed=3" in line for line in screen_lines(app))


@pytest.mark.parametrize("width", [40, 60, 80, 100, 120, 160, 200, 300])
def test_fit_columns_never_overflows(width: int) -> None:
    widths = fit_columns(width)
    assert list(widths)[0] == "index" and list(widths)[-1] == "detail"
    assert sum(w + 2 for w in widths.values()) <= max(width - SCROLLBAR,
                                                       sum(c.width + 2 for c in COLUMNS
                                                           if c.key in ("index", "detail")))
    assert widths["detail"] >= COLUMNS[-1].width


async def test_a_toggle_holds_for_its_size_and_a_resize_re_adapts(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app)
        await pilot.press("m")  # collapse the metrics on a tall terminal
        await pilot.pause()
        assert screen.query_one(MetricsPanel).collapsed
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert screen.query_one(MetricsPanel).collapsed and screen.compact
        await pilot.resize_terminal(120, 36)
        await pilot.pause()
        assert not screen.query_one(MetricsPanel).collapsed  # the tall layout again
        assert screen.query_one(RunningMeanChart).region.height > 0
