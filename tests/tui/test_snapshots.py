"""Snapshots of every screen at 120x36 over fixture run dirs (fake GPUs, fixed clock).

Regenerate with ``pytest tests/tui --snapshot-update`` and look at the SVGs: they are
the reference for what a user sees. They hold only for the Textual version range pinned
in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input
from tuihelpers import SIZE, wait_for

from evaltui.rundir.layout import episode_dir
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.screens.submit import SubmitScreen
from evaltui.tui.widgets.episodes_table import EpisodesTable
from evaltui.tui.widgets.runs_table import RunsTable

ALL_RUNS = 9


async def queue_ready(pilot: Pilot[None]) -> None:
    await wait_for(lambda: pilot.app.screen.query_one(RunsTable).row_count == ALL_RUNS,
                   what="all runs listed")
    await pilot.pause()


def test_queue_screen(snap_compare, runs, make_backend, app_factory) -> None:
    """Runs in every state (a corrupt one badged ⚠), two fake GPUs, host meters."""
    assert snap_compare(app_factory(make_backend()), terminal_size=SIZE,
                        run_before=queue_ready)


def test_queue_screen_nvml_unavailable(snap_compare, runs, make_backend, app_factory) -> None:
    """No GPU: the meters say NVML is unavailable and admission uses host RAM/CPU."""
    assert snap_compare(app_factory(make_backend(gpus=False)), terminal_size=SIZE,
                        run_before=queue_ready)


def test_queue_screen_light_theme(snap_compare, runs, make_backend, app_factory) -> None:
    assert snap_compare(app_factory(make_backend(), theme="light"), terminal_size=SIZE,
                        run_before=queue_ready)


def test_submit_modal_with_inline_error(snap_compare, runs, make_backend, app_factory) -> None:
    """The form after submitting 0 episodes: pydantic's message under the field."""
    async def fill(pilot: Pilot[None]) -> None:
        await queue_ready(pilot)
        await pilot.press("s")
        await wait_for(lambda: isinstance(pilot.app.screen, SubmitScreen))
        pilot.app.screen.query_one("#episodes", Input).value = "0"
        for field in pilot.app.screen.query(Input):
            field.cursor_blink = False  # a blinking cursor is timing, not layout
        await pilot.press("ctrl+s")
        await pilot.pause()

    assert snap_compare(app_factory(make_backend()), terminal_size=SIZE, run_before=fill)


def test_run_screen(snap_compare, runs, app_factory) -> None:
    """A running run: metrics with CIs, progress with ETA, 12 episode rows."""
    async def loaded(pilot: Pilot[None]) -> None:
        await wait_for(lambda: pilot.app.screen.query_one(EpisodesTable).row_count == 12,
                       what="episode rows")
        await pilot.pause()

    assert snap_compare(app_factory(run_dir=runs["running"]), terminal_size=SIZE,
                        run_before=loaded)


def test_replay_screen_at_error(snap_compare, runs, app_factory) -> None:
    """Episode 5 failed at step 2: ``e`` jumps there; the frame is the last one before."""
    async def at_error(pilot: Pilot[None]) -> None:
        screen = pilot.app.screen
        assert isinstance(screen, ReplayScreen)
        await wait_for(lambda: screen.indexed and bool(screen.firings), what="first step")
        await pilot.press("e")
        await wait_for(lambda: screen.step == 2 and any(f.is_error for f in screen.firings),
                       what="error step")
        await pilot.pause()

    ep: Path = episode_dir(runs["done"], 5)
    assert snap_compare(app_factory(replay_dir=ep), terminal_size=SIZE, run_before=at_error)
