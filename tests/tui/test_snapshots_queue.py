"""Snapshots of the queue screen and the compare screen at 80x24, 120x36 and 200x50
(fixture run dirs, fake GPUs, fixed clock): which columns fit, names widening on wide
screens, the one-line header, the detail pane and a footer that is never cut.

Regenerate with ``pytest tests/tui/test_snapshots_queue.py --snapshot-update`` and look
at the SVGs.
"""

from __future__ import annotations

import pytest
from comparefixtures import FLIPPED_ID, flipped_run
from textual.pilot import Pilot
from tuihelpers import meters_settled, wait_for

from evaltui.tui.screens.compare import CompareScreen
from evaltui.tui.widgets.runs_table import RunsTable

SIZES = [(80, 24), (120, 36), (200, 50)]
ALL_RUNS = 9


async def queue_ready(pilot: Pilot[None], rows: int = ALL_RUNS) -> None:
    await wait_for(lambda: pilot.app.screen.query_one(RunsTable).row_count == rows,
                   what="all runs listed")
    await meters_settled(pilot)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_queue(size, snap_compare, runs, make_backend, app_factory) -> None:
    """Queued ones with their reason, running, finished, failed, a corrupt one (⚠)."""
    async def selected(pilot: Pilot[None]) -> None:
        await queue_ready(pilot)
        table = pilot.app.screen.query_one(RunsTable)
        table.move_cursor(row=table.get_row_index(runs["queued"].name))
        await pilot.pause()

    assert snap_compare(app_factory(make_backend()), terminal_size=size, run_before=selected)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare(size, snap_compare, runs, make_backend, app_factory) -> None:
    """The done run (A) against a copy with three successes flipped (B)."""
    flipped_run(runs["done"])

    async def compared(pilot: Pilot[None]) -> None:
        await queue_ready(pilot, ALL_RUNS + 1)
        table = pilot.app.screen.query_one(RunsTable)
        for run_id in (runs["done"].name, FLIPPED_ID):
            table.move_cursor(row=table.get_row_index(run_id))
            await pilot.pause()
            await pilot.press("m")
        await pilot.press("x")
        await wait_for(lambda: isinstance(pilot.app.screen, CompareScreen))
        screen = pilot.app.screen
        await wait_for(lambda: screen.result is not None, timeout=20,  # type: ignore[attr-defined]
                       what="the comparison")
        pilot.app.clear_notifications()  # the marks' toast: timing, not layout
        await pilot.pause()

    assert snap_compare(app_factory(make_backend()), terminal_size=size, run_before=compared)
