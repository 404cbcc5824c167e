"""The command palette's evaltui commands (ctrl+p): the screens' actions by name, and
``open run …`` for every run the queue lists.

Each command only appears where it acts: queue actions on the queue screen, ``jump to
episode #`` on a run screen. They call the same actions as the keys, so a palette
command and its key can never do different things.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING

from textual.app import SystemCommand
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.screen import Screen

from evaltui.rundir.layout import episode_dir
from evaltui.tui.screens.ask_number import AskNumberScreen
from evaltui.tui.screens.queue import QueueScreen
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.screens.run import RunScreen
from evaltui.tui.widgets.runs_table import RunsTable

if TYPE_CHECKING:
    from evaltui.tui.app import EvalApp


def queue_screen(app: EvalApp) -> QueueScreen | None:
    """The queue screen in the app's stack (under a run screen, say), if any."""
    return next((s for s in app.screen_stack if isinstance(s, QueueScreen)), None)


def action_commands(app: EvalApp, screen: Screen[object]) -> Iterator[SystemCommand]:
    """The evaltui commands that act on ``screen``."""
    if isinstance(screen, QueueScreen):
        yield SystemCommand("Submit a run", "open the submit form (s)", screen.action_submit)
        yield SystemCommand("Cancel the selected run", "SIGTERM a running run, drop a "
                            "queued one (c)", screen.action_cancel_run)
        yield SystemCommand("Resume the selected run", "re-run what is not ok of a finished "
                            "run (R)", screen.action_resume)
        yield SystemCommand("Mark the selected run for compare", "A, then B (m)",
                            screen.action_mark)
        yield SystemCommand("Compare the marked runs", "B against A: differences with CIs, "
                            "McNemar, flipped episodes (x)", screen.action_compare)
        yield SystemCommand("Take or release the interactive lock", "admit nothing while "
                            "you work on the GPU (l)", screen.action_lock)
        yield SystemCommand("Sort the queue by the next column", "queue order, name, "
                            "state, progress, SR, ... (o)", screen.action_sort)
    if isinstance(screen, RunScreen):
        yield SystemCommand("Jump to episode #", "open the replay of an episode by its "
                            "index", partial(ask_episode, app, screen))


def ask_episode(app: EvalApp, screen: Screen[object]) -> None:
    """Ask for an episode index, then open its replay in the run screen's run."""
    run_dir = screen.run_dir  # type: ignore[attr-defined]

    def chosen(index: int | None) -> None:
        if index is None:
            return
        ep_dir = episode_dir(run_dir, index)
        if not ep_dir.is_dir():
            app.notify(f"episode {index} has no directory in this run (yet)",
                       severity="warning", timeout=5)
            return
        app.push_screen(ReplayScreen(ep_dir))

    app.push_screen(AskNumberScreen("Open the replay of episode #"), chosen)


class RunsProvider(Provider):
    """``open run RUN_ID name state`` for each run the queue screen lists."""

    def _commands(self) -> Iterable[tuple[str, str, object]]:
        app: EvalApp = self.app  # type: ignore[assignment]
        queue = queue_screen(app)
        if queue is None:
            return []
        table = queue.query_one(RunsTable)
        found = []
        for run in table.all_runs:
            if run.kind != "run":
                continue
            title = f"open run {run.run_id} {run.graph} {run.state.value}"
            found.append((title, f"{run.dataset}/{run.split} · {run.episodes_finished}/"
                          f"{run.episodes_total} episodes", partial(self._open, run.run_id)))
        return found

    def _open(self, run_id: str) -> None:
        app: EvalApp = self.app  # type: ignore[assignment]
        queue = queue_screen(app)
        if queue is None:
            return
        run = queue.query_one(RunsTable).run(run_id)
        if run is None or run.run_dir is None:
            app.notify(f"run {run_id} is no longer listed", severity="warning")
            return
        app.open_run(run.run_dir, run.episodes_total)

    async def discover(self) -> Hits:
        for title, help_text, callback in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback,  # type: ignore[arg-type]
                          help=help_text)
