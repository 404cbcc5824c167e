"""Constants and waiting for the TUI tests, in a module of its own: ``from conftest import``
is ambiguous when tests/tui and tests/api (each with a conftest.py) run in one session."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.pilot import Pilot

from evaltui.tui.screens.queue import QueueScreen
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.screens.submit import SubmitScreen
from evaltui.tui.widgets.meters import ResourceMeters
from evaltui.tui.widgets.runs_table import RunsTable

SIZE = (120, 36)


async def wait_for(cond: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    """Let the app run until ``cond()`` holds (workers and watcher threads post late)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await asyncio.sleep(0.02)


# The queue screen over the ``runs`` fixture (tests/tui/conftest.py): its nine run dirs.
ALL_RUNS = 9


def runs_table(app: App[Any]) -> RunsTable:
    """The queue screen's RunsTable."""
    return app.screen.query_one(RunsTable)


async def queue_ready(app: App[Any]) -> None:
    """Wait until the queue screen lists every run of the ``runs`` fixture."""
    await wait_for(lambda: isinstance(app.screen, QueueScreen) and
                   runs_table(app).row_count == ALL_RUNS, what="all runs listed")


async def select_run(pilot: Pilot[Any], run_id: str) -> None:
    """Move the queue's cursor onto ``run_id``."""
    t = runs_table(pilot.app)
    t.move_cursor(row=t.get_row_index(run_id))
    await pilot.pause()


async def open_submit(pilot: Pilot[Any]) -> SubmitScreen:
    """From a ready queue screen, press s and wait for the submit form (returned)."""
    await queue_ready(pilot.app)
    await pilot.press("s")
    await wait_for(lambda: isinstance(pilot.app.screen, SubmitScreen), what="the submit form")
    return pilot.app.screen  # type: ignore[return-value]


async def replay_opened(app: App[Any]) -> ReplayScreen:
    """The replay screen the app opened on, once its episode is indexed and its first
    step's firings are read."""
    screen = app.screen
    assert isinstance(screen, ReplayScreen)
    await wait_for(lambda: screen.indexed and bool(screen.firings), what="the first step")
    return screen


async def meters_settled(pilot: Pilot[Any]) -> None:
    """Wait for a GPU reading, then keep each meter's last one only: how many readings came
    in before a snapshot is timing (a loaded machine takes two), not layout."""
    meters = pilot.app.screen.query_one(ResourceMeters)
    await wait_for(lambda: bool(meters.history), what="a GPU reading")
    for key, samples in meters.history.items():
        meters.history[key] = deque(samples, maxlen=1)
    meters.refresh()
    await pilot.pause()
