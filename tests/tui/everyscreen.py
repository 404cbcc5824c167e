"""Open each screen of the TUI the way a user gets there, for the tests that must hold on
every screen (one quit key, the core keys in the footer) and their 80x24 snapshots.

``SCREENS`` maps a screen's name to how to build the app (over the backend, a run dir or
an episode dir) and the keys that bring it up; ``open_screen`` does both and waits until
the screen shows its data.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from comparefixtures import flipped_run
from textual.pilot import Pilot
from textual.widgets import Input
from textual.widgets._footer import FooterKey
from tuihelpers import wait_for

from evaltui.rundir.layout import episode_dir
from evaltui.tui.app import EvalApp
from evaltui.tui.screens.compare import CompareScreen
from evaltui.tui.screens.help import HelpScreen
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.screens.submit import SubmitScreen
from evaltui.tui.widgets.episodes_table import EpisodesTable
from evaltui.tui.widgets.metrics_panel import MetricsPanel
from evaltui.tui.widgets.runs_table import RunsTable

ALL_RUNS = 9
SCREENS = ("queue", "run", "failed_run", "replay", "submit", "compare", "help", "set")

CORE: dict[str, tuple[str, ...]] = {
    # The footer words each screen must show at 80 columns (besides Quit).
    "queue": ("Open", "Submit", "Filter", "Help"),
    "run": ("Replay", "Filter", "Status", "Back", "Help"),
    "failed_run": ("Filter", "Back", "Help"),
    "replay": ("Step", "Play", "Speed", "Error", "Back", "Help"),
    "submit": ("Submit", "Cancel"),
    "compare": ("Replay in A", "Replay in B", "Back", "Help"),
    "help": ("Close",),
    "set": ("Open", "vs baseline", "Pivot", "Back", "Help"),
}


def build_app(name: str, runs: dict[str, Path], make_backend: Callable[..., Any],
              app_factory: Callable[..., EvalApp]) -> EvalApp:
    if name == "run":
        return app_factory(run_dir=runs["running"])
    if name == "failed_run":
        return app_factory(run_dir=runs["failed"])
    if name == "replay":
        return app_factory(replay_dir=episode_dir(runs["done"], 5))
    return app_factory(make_backend())


async def open_screen(name: str, pilot: Pilot[None], runs: dict[str, Path]) -> None:
    """Bring up screen ``name`` in an app made by :func:`build_app`, data shown."""
    app = pilot.app
    if name in ("queue", "submit", "compare", "help"):
        await wait_for(lambda: app.screen.query_one(RunsTable).row_count == ALL_RUNS,
                       what="all runs listed")
    if name == "run":
        await wait_for(lambda: any(t.row_count == 12 for t in app.screen.query(EpisodesTable))
                       and _summary_shown(app), what="episode rows")
    if name == "failed_run":
        await wait_for(lambda: _summary_shown(app), what="the failed run's summary")
    if name == "replay":
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        await wait_for(lambda: screen.indexed and bool(screen.firings), what="first step")
    if name == "submit":
        await pilot.press("s")
        await wait_for(lambda: isinstance(app.screen, SubmitScreen), what="the form")
        for field in app.screen.query(Input):
            field.cursor_blink = False  # a blinking cursor is timing, not layout
    if name == "compare":
        run_b = flipped_run(runs["done"])
        app.push_screen(CompareScreen(runs["done"], run_b))
        await wait_for(lambda: isinstance(app.screen, CompareScreen)
                       and app.screen.result is not None, timeout=20, what="the comparison")
    if name == "set":
        from setfixtures import build_set

        from evaltui.tui.screens.set_screen import SetScreen

        app.open_set(build_set(runs["done"].parents[1], runs["done"]))
        await wait_for(lambda: isinstance(app.screen, SetScreen)
                       and app.screen.table is not None, what="the set's table")
    if name == "help":
        await pilot.press("question_mark")
        await wait_for(lambda: isinstance(app.screen, HelpScreen), what="help")
    await pilot.pause()
    await pilot.pause()


def _summary_shown(app: EvalApp) -> bool:
    return any(p.summary is not None for p in app.screen.query(MetricsPanel))


def footer_keys(app: EvalApp) -> list[tuple[str, str, int]]:
    """(key, description, right edge) of each key drawn in the current screen's footer."""
    return [(k.key_display, k.description, k.region.right) for k in
            app.screen.query(FooterKey) if k.display and k.region.width]
