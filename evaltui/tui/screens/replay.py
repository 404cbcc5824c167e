"""ReplayScreen: step through one episode's log with its frames, without re-running it.

The log is indexed in a thread worker, a first chunk before the rest, so the first
step shows at once even for a log of hundreds of thousands of lines; the timeline
grows as indexing goes on. Each step's records and frame are read in a thread worker
too (a few ``pread`` calls); a burst of key presses coalesces into the last step.
While the episode has no episode.json yet (it is still running) the log is re-indexed
every second, so a replay can follow a live episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import get_current_worker

from evaltui.runview.replay import EpisodeReplay, Firing, error_step_from
from evaltui.tui.messages import LogIndexed, StepLoaded
from evaltui.tui.screens.ask_number import AskNumberScreen
from evaltui.tui.widgets.episode_header import EpisodeHeader
from evaltui.tui.widgets.firing_view import FiringView
from evaltui.tui.widgets.frame_view import (
    FrameView,
    GraphicsFrameView,
    frame_caption,
    graphics_requested,
)
from evaltui.tui.widgets.keys_footer import KeysFooter
from evaltui.tui.widgets.timeline import Timeline, TimelineState

FIRST_CHUNK_BYTES = 1 << 20
"""Indexed before the first screen: enough for the first steps of any log."""
CHUNK_BYTES = 32 << 20
PLAY_SPEEDS = (1.0, 2.0, 4.0, 8.0, 16.0)
"""Steps a second that ``[`` and ``]`` choose from while playing; 4 to start."""
FOLLOW_INTERVAL_SEC = 1.0

Landing = Literal["first", "last", "error"]
"""Which record of a step becomes current when the step is entered."""


class ReplayScreen(Screen[None]):
    """One episode: header, step timeline, the step's firings and its frame."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # A pair of keys shows once ("←/→ Step"), in the footer and in help (the same
        # description); the tooltip is help's longer wording.
        Binding("left", "step(-1)", "Step", key_display="←/→", tooltip="previous / next step"),
        Binding("right", "step(1)", "Step", show=False),
        Binding("n", "firing(1)", "Firing", key_display="n/N",
                tooltip="next / previous record of the step"),
        Binding("N", "firing(-1)", "Firing", show=False),
        Binding("e", "error(1)", "Error", key_display="e/E",
                tooltip="next / previous step with an error"),
        Binding("E", "error(-1)", "Error", show=False),
        Binding("g", "goto", "Go to", tooltip="go to a step by number"),
        Binding("space", "play", "Play", tooltip="play / pause"),
        Binding("left_square_bracket", "speed(-1)", "Speed", key_display="[/]",
                tooltip="slower / faster while playing"),
        Binding("right_square_bracket", "speed(1)", "Speed", show=False),
        Binding("home", "first", "First", key_display="home/end", show=False,
                tooltip="first / last step"),
        Binding("end", "last", "First", show=False),
        Binding("pageup", "scroll_firings(-1)", "Scroll", key_display="pgup/pgdn",
                show=False, tooltip="scroll the step's records"),
        Binding("pagedown", "scroll_firings(1)", "Scroll", show=False),
        Binding("escape", "back", "Back"),
    ]
    CORE_KEYS: ClassVar[tuple[str, ...]] = (
        "back", "step(-1)", "play", "speed(-1)", "error(1)", "firing(1)", "goto")
    """What the footer keeps at 80 columns, most important first (see KeysFooter)."""

    def __init__(self, ep_dir: Path, *, standalone: bool = False) -> None:
        super().__init__()
        self.ep_dir = Path(ep_dir)
        self.standalone = standalone
        self.replay = EpisodeReplay(self.ep_dir)
        self.step = 0
        self.last_step = 0
        self.error_steps: frozenset[int] = frozenset()
        self.indexed = False
        self.firings: list[Firing] = []
        self.current = 0
        self._landing: Landing = "first"
        self._player: Timer | None = None
        self.speed = PLAY_SPEEDS[2]
        self.total = 0
        """Records of the shown step (the firings shown may be fewer)."""
        self._follower: Timer | None = None

    def compose(self) -> ComposeResult:
        yield EpisodeHeader(id="replay-header")
        yield Timeline(id="timeline")
        with Horizontal(id="replay-body"):
            yield FiringView(id="firings")
            yield GraphicsFrameView(id="frame") if graphics_requested() else FrameView(id="frame")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#frame").border_title = "frame"
        self._show_header()
        self._index()
        if self.replay.episode_error is not None:  # still running: follow the log
            self._follower = self.set_interval(FOLLOW_INTERVAL_SEC, self._follow)

    # --- workers -------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="replay-index", exit_on_error=False)
    def _index(self, reload_episode: bool = False) -> None:
        if reload_episode:
            self.replay.load_episode()
            if self.replay.episode_error is None:  # written: the episode is over
                self.app.call_from_thread(self._episode_written)
        index = self.replay.index
        budget = FIRST_CHUNK_BYTES if not len(index) else CHUNK_BYTES
        worker = get_current_worker()
        while not worker.is_cancelled:
            index.scan(max_bytes=budget)
            self.post_message(LogIndexed(len(index), index.complete,
                                         self.replay.step_of(0) if len(index) else 0,
                                         self.replay.last_step,
                                         frozenset(self.replay.error_steps())))
            if index.complete:
                return
            budget = CHUNK_BYTES

    @work(thread=True, exclusive=True, group="replay-step", exit_on_error=False)
    def _load_step(self, step: int) -> None:
        firings, total = self.replay.firings(step)
        self.post_message(StepLoaded(step, firings, total, self.replay.frame_of(step)))

    def _follow(self) -> None:
        self._index(reload_episode=True)

    def _episode_written(self) -> None:
        if self._follower is not None:
            self._follower.stop()
            self._follower = None
        self._show_header()

    # --- messages ------------------------------------------------------------------------

    def on_log_indexed(self, message: LogIndexed) -> None:
        first = not self.indexed and message.lines > 0
        self.last_step = message.last_step
        self.error_steps = message.error_steps
        self.indexed = self.indexed or message.lines > 0
        self._show_timeline(indexing=not message.complete)
        if first:
            self._go(message.first_step, "first")
        elif message.lines == 0 and message.complete:
            self.query_one(FiringView).show([], 0, 0)

    def on_step_loaded(self, message: StepLoaded) -> None:
        if message.step != self.step:
            return  # superseded by a later key press
        self.firings = message.firings
        if self._landing == "last":
            self.current = max(0, len(self.firings) - 1)
        elif self._landing == "error":
            self.current = next((i for i, f in enumerate(self.firings) if f.is_error), 0)
        else:
            self.current = 0
        self.total = message.total
        self.query_one(FiringView).show(self.firings, message.total, self.current)
        self._show_title()
        frame = self.query_one("#frame")
        assert isinstance(frame, FrameView | GraphicsFrameView)
        frame.path = message.frame
        frame.caption = frame_caption(message.frame, self.step)

    def on_timeline_step_clicked(self, message: Timeline.StepClicked) -> None:
        self._go(message.step, "first")

    # --- actions -------------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        self._go(self.step + delta, "first")

    def action_first(self) -> None:
        self._go(0, "first")

    def action_last(self) -> None:
        self._go(self.last_step, "first")

    def action_scroll_firings(self, direction: int) -> None:
        view = self.query_one(FiringView)
        if direction > 0:
            view.scroll_page_down(animate=False)
        else:
            view.scroll_page_up(animate=False)

    def action_firing(self, delta: int) -> None:
        target = self.current + delta
        if 0 <= target < len(self.firings):
            self.current = target
            self.query_one(FiringView).show(self.firings, self.total, self.current)
            self._show_title()
        elif delta > 0 and self.step < self.last_step:
            self._go(self.step + 1, "first")
        elif delta < 0 and self.step > 0:
            self._go(self.step - 1, "last")

    def action_error(self, direction: int) -> None:
        target = error_step_from(self.error_steps, self.step, direction)
        if target is None:
            self.notify("no errors in this episode", timeout=2)
            return
        self._go(target, "error")

    def action_goto(self) -> None:
        def chosen(step: int | None) -> None:
            if step is not None:
                self._go(step, "first")
        self.app.push_screen(AskNumberScreen(f"Go to step (0–{self.last_step})",
                                             maximum=self.last_step, value=str(self.step)),
                             chosen)

    @property
    def playing(self) -> bool:
        return self._player is not None

    def action_play(self) -> None:
        if self._player is not None:
            self._stop_playing()
            return
        if self.step >= self.last_step:
            self._go(0, "first")
        self._player = self.set_interval(1 / self.speed, self._advance)
        self._show_timeline(indexing=not self.replay.index.complete)

    def action_speed(self, delta: int) -> None:
        position = PLAY_SPEEDS.index(self.speed) + delta
        self.speed = PLAY_SPEEDS[max(0, min(len(PLAY_SPEEDS) - 1, position))]
        if self._player is not None:  # restart the timer at the new pace
            self._player.stop()
            self._player = self.set_interval(1 / self.speed, self._advance)
        self._show_timeline(indexing=not self.replay.index.complete)

    def _stop_playing(self) -> None:
        if self._player is not None:
            self._player.stop()
            self._player = None
        self._show_timeline(indexing=not self.replay.index.complete)

    def _advance(self) -> None:
        if self.step >= self.last_step:
            self._stop_playing()
            return
        self._go(self.step + 1, "first")

    def action_back(self) -> None:
        if self.standalone:
            self.app.exit()
        else:
            self.dismiss()

    # --- display -------------------------------------------------------------------------

    def _go(self, step: int, landing: Landing) -> None:
        if not self.indexed:
            return
        self.step = max(0, min(step, self.last_step))
        self._landing = landing
        self._show_timeline(indexing=not self.replay.index.complete)
        self._show_title(loading=True)
        self._load_step(self.step)

    def _show_timeline(self, *, indexing: bool) -> None:
        self.query_one(Timeline).state = TimelineState(self.last_step, self.step,
                                                       self.error_steps, indexing,
                                                       self.playing, self.speed)

    def _show_title(self, *, loading: bool = False) -> None:
        """The firings panel's title, always for the same step as the timeline: while a
        step loads it says so rather than keep the previous step's number."""
        view = self.query_one(FiringView)
        if loading:
            view.border_title = f"step {self.step} · loading…"
        elif not self.firings:
            view.border_title = f"step {self.step} · no records"
        else:
            view.border_title = (f"step {self.step} · ▸ record {self.current + 1} of "
                                 f"{self.total}")

    def _show_header(self) -> None:
        self.query_one(EpisodeHeader).show(self.replay.episode, self.replay.episode_error,
                                           self.ep_dir)
