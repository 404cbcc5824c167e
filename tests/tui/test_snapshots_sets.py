"""Snapshots of sets in the TUI at 80x24, 120x36 and 200x50: the queue screen with a set
group, and the set screen (table, best marked, plot over checkpoints, footer keys) of a
short and a long checkpoint set and of a grid set, pivoted too.

Regenerate with ``pytest tests/tui/test_snapshots_sets.py --snapshot-update`` and look
at the SVGs.
"""

from __future__ import annotations

import pytest
from setfixtures import build_grid_set, build_long_set, build_set
from textual.pilot import Pilot
from tuihelpers import meters_settled, wait_for

from evaltui.tui.screens.set_screen import SetScreen
from evaltui.tui.widgets.runs_table import RunsTable
from evaltui.tui.widgets.set_groups import SetGroups

SIZES = [(80, 24), (120, 36), (200, 50)]
ALL_RUNS = 9 + 3


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_queue_with_a_set(size, snap_compare, runs, outputs, make_backend,
                          app_factory) -> None:
    build_set(outputs, runs["done"])

    async def listed(pilot: Pilot[None]) -> None:
        screen = pilot.app.screen
        # Laid out, not only filled: the groups' tree shows after a layout pass.
        await wait_for(lambda: screen.query_one(RunsTable).row_count == ALL_RUNS
                       and bool((groups := screen.query_one(SetGroups)).root.children)
                       and groups.size.height > 0
                       # the members as the queue's poll has them, not set.json's first read
                       and "20/20" in str(groups.root.children[0].children[0].label),
                       # the queue's poll and the set read run on a loaded machine too
                       timeout=30, what="runs and set listed")
        await meters_settled(pilot)

    assert snap_compare(app_factory(make_backend()), terminal_size=size, run_before=listed)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_set_screen(size, snap_compare, runs, outputs, make_backend, app_factory) -> None:
    path = build_set(outputs, runs["done"])

    async def shown(pilot: Pilot[None]) -> None:
        pilot.app.open_set(path)
        await wait_for(lambda: isinstance(pilot.app.screen, SetScreen)
                       and pilot.app.screen.table is not None, what="the set's table")
        await pilot.pause()

    assert snap_compare(app_factory(make_backend()), terminal_size=size, run_before=shown)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("kind", ["long", "grid", "grid-pivot"])
def test_set_screen_of(kind, size, snap_compare, runs, outputs, make_backend,
                       app_factory) -> None:
    """Twelve checkpoints (the table keeps its rows, the plots fit their boxes) and a
    graph x split grid, as it is and pivoted by graph (mean [95% CI] in the footer)."""
    build = build_long_set if kind == "long" else build_grid_set
    path = build(outputs, runs["done"])

    async def shown(pilot: Pilot[None]) -> None:
        pilot.app.open_set(path)
        await wait_for(lambda: isinstance(pilot.app.screen, SetScreen)
                       and pilot.app.screen.table is not None, what="the set's table")
        if kind == "grid-pivot":
            await pilot.press("p")
            await wait_for(lambda: pilot.app.screen.pivot == "graph", what="the pivot")
        await pilot.pause()

    assert snap_compare(app_factory(make_backend()), terminal_size=size, run_before=shown)
