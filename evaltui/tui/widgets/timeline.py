"""Timeline: an episode's steps as one bar, with the current step and the error steps.

Each cell stands for a run of steps when there are more steps than cells; a cell
holding an error step is drawn in the error colour so errors stay visible at any
length. Clicking a cell goes to its first step.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from rich.console import Group
from rich.text import Text
from textual import events
from textual.message import Message
from textual.reactive import reactive

from evaltui.tui.widgets.bars import ThemedWidget, theme_style


@dataclass(frozen=True)
class TimelineState:
    """Steps ``0..last_step``, the current one, and those with an error."""

    last_step: int
    current: int
    error_steps: frozenset[int] = frozenset()
    indexing: bool = False
    """True while the log is still being indexed (more steps may appear)."""
    playing: bool = False
    speed: float = 4.0
    """Steps a second while playing."""


class Timeline(ThemedWidget):
    """A one-line bar of the steps of an episode, with a caption line."""

    DEFAULT_CSS = """
    Timeline {
        height: 2;
        padding: 0 1;
    }
    """

    state: reactive[TimelineState | None] = reactive(None)

    @dataclass
    class StepClicked(Message):
        """A cell of the bar was clicked (handler: ``on_timeline_step_clicked``)."""

        step: int

    def _layout(self, steps: int) -> tuple[int, int]:
        """(cells, width): ``cells`` marks of ``width`` columns each fill the bar."""
        avail = max(1, self.content_size.width)
        if steps * 2 <= avail:  # few steps: one wide mark each
            return steps, avail // steps
        return avail, 1

    @staticmethod
    def _step_range(cell: int, cells: int, steps: int) -> range:
        start = cell * steps // cells
        stop = max(start + 1, (cell + 1) * steps // cells)
        return range(start, min(stop, steps))

    def render(self) -> Group | Text:
        state = self.state
        app = self.app
        if state is None:
            return Text("indexing the log…", style=theme_style(app, "foreground-muted"))
        steps = state.last_step + 1
        cells, width = self._layout(steps)
        bar = Text(no_wrap=True, overflow="crop")
        error = theme_style(app, "error", bold=True)
        errors = sorted(state.error_steps)
        for cell in range(cells):
            span = self._step_range(cell, cells, steps)
            past = span.start < state.current
            if state.current in span:
                glyph, style = "●", theme_style(app, "accent", bold=True)
            elif _any_in(errors, span):
                glyph, style = "▲", error
            else:
                glyph = "○" if width > 2 else "━"  # wide marks: show where steps begin
                style = theme_style(app, "primary" if past else "panel-lighten-2")
            bar.append(glyph, style)
            if width > 1:
                bar.append("━" * (width - 1),
                           theme_style(app, "primary" if past else "panel-lighten-2"))
        caption = Text()
        if state.playing:  # glyph and word: the state reads without colour too
            caption.append(f"▶ playing {state.speed:g} steps/s",
                           style=theme_style(app, "success", bold=True))
        else:
            caption.append("❚❚ paused", style=theme_style(app, "warning", bold=True))
        caption.append("   ")
        caption.append(f"step {state.current} / {state.last_step}",
                       style=theme_style(app, "foreground", bold=True))
        n = len(errors)
        caption.append(f"   {n} error step{'s' if n != 1 else ''}",
                       style=error if n else theme_style(app, "foreground-muted"))
        if state.indexing:
            caption.append("   indexing…", style=theme_style(app, "foreground-muted"))
        return Group(bar, caption)

    def on_click(self, event: events.Click) -> None:
        state = self.state
        if state is None or event.y != 0:
            return
        steps = state.last_step + 1
        cells, width = self._layout(steps)
        cell = (event.x - self.styles.padding.left) // width
        if 0 <= cell < cells:
            self.post_message(self.StepClicked(self._step_range(cell, cells, steps).start))


def _any_in(sorted_steps: list[int], span: range) -> bool:
    i = bisect_left(sorted_steps, span.start)
    return i < len(sorted_steps) and sorted_steps[i] < span.stop
