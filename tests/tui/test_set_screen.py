"""Sets in the TUI: the queue screen's set groups (progress, folding, enter) and the set
screen (table with CIs and the best marked, pivot, the plot over checkpoints, enter on a
member, x against the baseline), over fixture set and run dirs."""

from __future__ import annotations

import json

import pytest
from setfixtures import RUN_IDS, SET_ID, build_set
from textual.widgets import DataTable, Static
from tuihelpers import SIZE, wait_for

from evaltui.tui.screens.compare import CompareScreen
from evaltui.tui.screens.queue import QueueScreen
from evaltui.tui.screens.run import RunScreen
from evaltui.tui.screens.set_screen import BEST_MARK, SetScreen
from evaltui.tui.widgets.set_groups import SetGroups
from evaltui.tui.widgets.set_plot import SetPlot

pytestmark = pytest.mark.anyio


@pytest.fixture
def set_path(runs, outputs):
    return build_set(outputs, runs["done"])


def groups(app) -> SetGroups:
    return app.screen.query_one(SetGroups)


async def groups_ready(app) -> None:
    await wait_for(lambda: isinstance(app.screen, QueueScreen) and groups(app).groups
                   and groups(app).root.children, what="the set groups")


async def test_the_queue_groups_a_set_with_its_progress_and_folds_it(
        set_path, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await groups_ready(app)
        tree = groups(app)
        assert tree.display
        node = tree.root.children[0]
        assert SET_ID in str(node.label) and "3/4 done · 1 pending" in str(node.label)
        assert node.is_expanded  # a set still running shows its members
        labels = [str(leaf.label) for leaf in node.children]
        assert [label.split()[0] for label in labels] == ["done"] * 3 + ["pending"]
        assert RUN_IDS[0] in labels[0] and "step=100" in labels[0]
        tree.focus()
        tree.move_cursor(node)
        await pilot.press("space")
        assert not node.is_expanded
        await pilot.press("space")
        assert node.is_expanded

        tree.move_cursor(node.children[2])
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, RunScreen), what="the member's run")
        assert app.screen.run_dir.name == RUN_IDS[2]
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, QueueScreen))
        groups(app).move_cursor(groups(app).root.children[0])
        groups(app).focus()
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, SetScreen), what="the set screen")
        assert app.screen.set_dir == set_path


async def set_screen(app, set_path) -> SetScreen:
    app.open_set(set_path)
    await wait_for(lambda: isinstance(app.screen, SetScreen) and app.screen.table is not None,
                   what="the set's table")
    return app.screen


def cells(screen: SetScreen) -> list[list[str]]:
    widget = screen.query_one("#set-table", DataTable)
    return [[str(c) for c in widget.get_row_at(i)] for i in range(widget.row_count)]


async def test_the_set_screen_shows_the_table_pivots_and_plots(
        set_path, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        screen = await set_screen(app, set_path)
        await pilot.pause()
        rows = cells(screen)
        assert len(rows) == 4
        headers = [str(c.label) for c in screen.query_one("#set-table",
                                                          DataTable).columns.values()]
        success = headers.index("success")
        for row, run_id in zip(rows, RUN_IDS, strict=False):  # the members' own summaries
            summary = json.loads((set_path.parents[1] / "eval_runs" / run_id
                                  / "summary.json").read_text())
            lo, hi = summary["metrics_ci95"]["success"]
            assert row[success].startswith(f"{summary['metrics']['success']:.3f} "
                                           f"[{lo:.3f}, {hi:.3f}]")
        marked = [i for i, row in enumerate(rows) if row[success].endswith(BEST_MARK)]
        assert marked == [2]  # step 300 has the best success
        assert rows[3][headers.index("state")] == "pending"
        plots = [str(p.render()) for p in screen.query(".set-plot").results(SetPlot)]
        assert any(p.startswith("success over steps") for p in plots)
        assert "baseline step=100" in str(screen.query_one("#set-header", Static).render())

        # One axis (a checkpoint and its step): a pivot would be a diagonal of "-".
        await pilot.press("p")
        assert screen.pivot is None and len(cells(screen)) == 4


async def test_enter_opens_a_member_and_x_compares_it_with_the_baseline(
        set_path, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        screen = await set_screen(app, set_path)
        table = screen.query_one("#set-table", DataTable)
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("x")  # the baseline itself: nothing to compare
        assert app.screen is screen
        table.move_cursor(row=2)
        await pilot.press("x")
        await wait_for(lambda: isinstance(app.screen, CompareScreen), what="the comparison")
        compare = app.screen
        assert tuple(d.name for d in compare.run_dirs) == (RUN_IDS[0], RUN_IDS[2])
        await pilot.press("escape")
        await wait_for(lambda: app.screen is screen)
        table.move_cursor(row=1)
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, RunScreen), what="the member's run")
        assert app.screen.run_dir.name == RUN_IDS[1]
        await pilot.press("escape")
        await wait_for(lambda: app.screen is screen)
        table.move_cursor(row=3)
        await pilot.press("enter")  # pending: no run dir yet
        assert app.screen is screen
