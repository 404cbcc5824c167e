"""Snapshots of the run and replay screens at 80x24, 120x36 and 200x50.

Small terminals get one-line metrics and progress and no plots; tall ones the boxed
panels and the running-mean plots; wide ones the scene column and longer names.
Regenerate with ``pytest tests/tui/test_snapshots_sizes.py --snapshot-update`` and look.
"""

from __future__ import annotations

import pytest
from textual.pilot import Pilot
from tuihelpers import wait_for

from evaltui.rundir.layout import episode_dir
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.widgets.episodes_table import EpisodesTable
from evaltui.tui.widgets.metrics_panel import MetricsPanel

SIZES = [(80, 24), (120, 36), (200, 50)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_run_screen_at(snap_compare, runs, app_factory, size) -> None:
    """A running run: 12 of 40 episodes, one error and one timeout."""
    async def loaded(pilot: Pilot[None]) -> None:
        screen = pilot.app.screen
        await wait_for(lambda: screen.query_one(EpisodesTable).row_count == 12
                       and screen.query_one(MetricsPanel).summary is not None,
                       what="episode rows")
        await pilot.pause()

    assert snap_compare(app_factory(run_dir=runs["running"]), terminal_size=size,
                        run_before=loaded)


def test_run_screen_80x24_with_plots(snap_compare, runs, app_factory) -> None:
    """``p`` on a small terminal: the plots take rows from the table."""
    async def plots(pilot: Pilot[None]) -> None:
        await wait_for(lambda: pilot.app.screen.query_one(EpisodesTable).row_count == 12,
                       what="episode rows")
        await pilot.press("p")
        await pilot.pause()

    assert snap_compare(app_factory(run_dir=runs["running"]), terminal_size=(80, 24),
                        run_before=plots)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_replay_screen_at(snap_compare, runs, app_factory, size) -> None:
    """Episode 5 at its error step, paused, the error firing selected."""
    async def at_error(pilot: Pilot[None]) -> None:
        screen = pilot.app.screen
        assert isinstance(screen, ReplayScreen)
        await wait_for(lambda: screen.indexed and bool(screen.firings), what="first step")
        await pilot.press("e")
        await wait_for(lambda: screen.step == 2 and any(f.is_error for f in screen.firings),
                       what="error step")
        await pilot.pause()

    ep = episode_dir(runs["done"], 5)
    assert snap_compare(app_factory(replay_dir=ep), terminal_size=size, run_before=at_error)
