"""EvalApp: the evaltui terminal UI, and ``make_app``, the one way to build it.

The CLI (``evaltui``, ``evaltui demo``, ``evaltui replay``) and the tests all call
``make_app``. The app starts on the queue screen when it has a backend, or directly on
a run or an episode replay when given a directory. Its clock is injectable so that
ages and ETAs in snapshot tests do not depend on the wall clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from evaltui.tui.backend import Backend
from evaltui.tui.keys import QUIT_ACTIONS, key_text
from evaltui.tui.palette import RunsProvider, action_commands
from evaltui.tui.screens.help import HelpScreen
from evaltui.tui.screens.queue import QueueScreen
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.screens.run import WATCH_DEBOUNCE_MS, RunScreen
from evaltui.tui.screens.set_screen import SetScreen
from evaltui.tui.themes import DEFAULT_THEME, install_themes, resolve_theme_name

Clock = Callable[[], datetime]

HELP = {
    "QueueScreen": "All runs: queued ones in admission order with why they wait, running ones "
                   "live, finished ones below. GPU and host meters on top.",
    "RunScreen": "One run: metrics with 95% confidence intervals, progress, and a row per "
                 "finished episode (click a header to sort).",
    "ReplayScreen": "One episode, step by step: the node firings of the step with their "
                    "inputs and outputs, and the frame the environment rendered.",
    "CompareScreen": "Run B against run A on the episodes both ran: per metric the mean "
                     "difference with its paired bootstrap 95% CI, McNemar's exact test "
                     "on success, and the episodes whose success flipped.",
    "SetScreen": "One experiment set: a row per member with mean [95% CI] per metric, the "
                 "best per metric marked; p pivots an axis into columns, enter opens a "
                 "member's run, x compares it with the set's baseline.",
}


class EvalApp(App[None]):
    """The evaltui TUI over a backend, a run dir, or an episode dir."""

    CSS_PATH = "app.tcss"
    TITLE = "evaltui"
    COMMANDS = App.COMMANDS | {RunsProvider}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        # One quit key on every screen (evaltui.tui.keys): q where it is not typed into a
        # field, ctrl+q everywhere; the footer shows the first of them that acts.
        Binding("q", "quit", "Quit"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, *, backend: Backend | None = None, run_dir: Path | None = None,
                 replay_dir: Path | None = None, theme: str = DEFAULT_THEME,
                 clock: Clock | None = None, poll_interval: float = 1.0,
                 watch_debounce_ms: int = WATCH_DEBOUNCE_MS) -> None:
        super().__init__()
        if sum(x is not None for x in (backend, run_dir, replay_dir)) != 1:
            raise ValueError("give exactly one of backend, run_dir, replay_dir")
        self.backend = backend
        self.run_dir = run_dir
        self.replay_dir = replay_dir
        self.clock: Clock = clock or (lambda: datetime.now().astimezone())
        self.poll_interval = poll_interval
        self.watch_debounce_ms = watch_debounce_ms
        self.theme_problems = install_themes(self)
        """One line per user theme file that did not load (notified on mount)."""
        self.theme = resolve_theme_name(theme, self.available_themes, self.theme_problems)

    def on_mount(self) -> None:
        for problem in self.theme_problems:
            self.notify(problem, title="Theme", severity="warning", timeout=10)

    def now(self) -> datetime:
        """The app's idea of the current time (injected in tests)."""
        return self.clock()

    def get_default_screen(self) -> Screen[None]:
        if self.replay_dir is not None:
            return ReplayScreen(self.replay_dir, standalone=True)
        if self.run_dir is not None:
            return RunScreen(self.run_dir, standalone=True, debounce_ms=self.watch_debounce_ms)
        assert self.backend is not None
        return QueueScreen(self.backend, poll_interval=self.poll_interval)

    def open_run(self, run_dir: Path, episodes_total: int | None = None) -> None:
        """Push the run screen of ``run_dir`` (``episodes_total``: known before a summary)."""
        self.push_screen(RunScreen(run_dir, debounce_ms=self.watch_debounce_ms,
                                   episodes_total=episodes_total))

    def open_set(self, set_dir: Path) -> None:
        """Push the set screen of ``set_dir`` (``outputs/eval_sets/{set_id}``)."""
        self.push_screen(SetScreen(set_dir))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """Textual's (themes, keys, quit…) plus evaltui's actions where they act."""
        yield from super().get_system_commands(screen)
        yield from action_commands(self, screen)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.screen, HELP.get(type(self.screen).__name__, "")))

    def action_help_quit(self) -> None:
        """Ctrl-C names the quit key the footer shows: q, or ctrl+q where q is typed."""
        keys = [key for key, active in self.screen.active_bindings.items()
                if active.binding.action in QUIT_ACTIONS]
        if keys:
            self.notify(f"Press [b]{key_text(min(keys, key=len))}[/b] to quit",
                        title="Do you want to quit?")

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """Every thread worker's exception ends up here, as a notification, not a crash."""
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            self.notify(f"{event.worker.name}: {type(error).__name__}: {error}",
                        severity="error", timeout=8)


def make_app(backend: Backend | None = None, *, run_dir: Path | None = None,
             replay_dir: Path | None = None, theme: str = DEFAULT_THEME,
             clock: Clock | None = None, poll_interval: float = 1.0,
             watch_debounce_ms: int = WATCH_DEBOUNCE_MS) -> EvalApp:
    """Build the app: over a backend (queue screen), a run dir, or an episode dir."""
    return EvalApp(backend=backend, run_dir=Path(run_dir) if run_dir else None,
                   replay_dir=Path(replay_dir) if replay_dir else None, theme=theme,
                   clock=clock, poll_interval=poll_interval,
                   watch_debounce_ms=watch_debounce_ms)
