"""What a new user hit in the set screen and the queue's set tree (issue 35, item 8): a
twelve-checkpoint set at 80x24 whose table collapsed to one line under plots that wrapped,
a pivot footer that lost "[95% CI]" to markup, a pivot by checkpoint that was a diagonal
of "-", a focused set tree that showed no keys, and enter on a set that did nothing."""

from __future__ import annotations

import pytest
from setfixtures import LONG_STEPS, SET_ID, build_grid_set, build_long_set, build_set
from textual.widgets import DataTable, Static
from tuihelpers import wait_for

from evaltui.tui.screens.queue import QueueScreen
from evaltui.tui.screens.set_screen import SetScreen
from evaltui.tui.widgets.keys_footer import KeysFooter
from evaltui.tui.widgets.set_groups import SetGroups
from evaltui.tui.widgets.set_plot import SetPlot

pytestmark = pytest.mark.anyio


async def open_set(app, path) -> SetScreen:
    app.open_set(path)
    await wait_for(lambda: isinstance(app.screen, SetScreen) and app.screen.table is not None,
                   what="the set's table")
    return app.screen


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_long_checkpoint_set_keeps_its_rows_and_its_plots_fit(
        size, runs, outputs, make_backend, app_factory) -> None:
    path = build_long_set(outputs, runs["done"])
    app = app_factory(make_backend())
    async with app.run_test(size=size) as pilot:
        screen = await open_set(app, path)
        await pilot.pause()
        table = screen.query_one("#set-table", DataTable)
        assert table.row_count == len(LONG_STEPS)
        assert table.size.height >= 6  # a header and five members at least, not one line
        plots = list(screen.query(SetPlot))
        assert len(plots) == 2
        for plot in plots:
            lines = str(plot.render()).splitlines()
            width = plot.content_region.width
            assert lines[0].startswith(("success over steps", "spl over steps"))
            assert max(len(line) for line in lines) <= width, lines  # nothing wraps
            assert len(lines) <= plot.content_region.height
            assert lines[-1].split()[0] == str(LONG_STEPS[0]) and \
                lines[-1].split()[-1] == str(LONG_STEPS[-1])
        # Every cell whole: the columns fit the screen, no cell cut to its header.
        widths = [c.get_render_width(table) for c in table.columns.values()]
        assert sum(widths) <= size[0]
        for i in range(table.row_count):
            for cell, column in zip(table.get_row_at(i), table.columns.values(), strict=True):
                assert len(str(cell)) <= column.width


async def test_a_checkpoint_set_has_nothing_to_pivot(runs, outputs, make_backend,
                                                     app_factory) -> None:
    path = build_set(outputs, runs["done"])
    app = app_factory(make_backend())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_set(app, path)
        await pilot.press("p")
        assert screen.pivot is None
        rows = screen.query_one("#set-table", DataTable).row_count
        assert rows == 4


async def test_a_grid_pivot_keeps_its_footer_and_its_cells(runs, outputs, make_backend,
                                                           app_factory) -> None:
    path = build_grid_set(outputs, runs["done"])
    app = app_factory(make_backend())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_set(app, path)
        await pilot.press("p")
        await wait_for(lambda: screen.pivot == "graph", what="the pivot")
        await pilot.pause()
        notes = str(screen.query_one("#set-notes", Static).render())
        assert "mean [95% CI] (n)" in notes
        table = screen.query_one("#set-table", DataTable)
        assert table.row_count == 2  # a row per split, a column per graph: no diagonal
        first = [str(c) for c in table.get_row_at(0)]
        assert first[0] == "GoToLocal"
        assert all("-" != c for c in first)
        for cell, column in zip(table.get_row_at(0), table.columns.values(), strict=True):
            assert len(str(cell)) <= column.width  # not cut to the header's width


async def test_the_focused_set_tree_shows_its_keys_and_enter_opens_the_set(
        runs, outputs, make_backend, app_factory) -> None:
    build_set(outputs, runs["done"])
    app = app_factory(make_backend())
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: isinstance(app.screen, QueueScreen)
                       and app.screen.query_one(SetGroups).root.children, what="the set")
        tree = app.screen.query_one(SetGroups)
        tree.focus()  # as tab does: the cursor is not moved by hand
        await pilot.pause()
        footer = app.screen.query_one(KeysFooter)
        await wait_for(lambda: ("⏎", "Open") in footer.shown_keys
                       and any(d == "Fold" for _, d in footer.shown_keys),
                       what="the tree's keys in the footer")
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, SetScreen), what="the set screen")
        assert app.screen.set_dir.name == SET_ID
