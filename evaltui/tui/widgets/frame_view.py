"""FrameView: the frame of the current step, drawn with half-block cells.

Half blocks work in any true-colour terminal and in snapshots. When the optional
``textual-image`` package is installed and ``EVALTUI_FRAMES=graphics`` is set, the
frame is shown through it instead (sixel / kitty protocols, full resolution).
"""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from evaltui.settings import settings
from evaltui.tui.widgets.bars import theme_style
from evaltui.tui.widgets.halfblock import HalfBlockImage

_FRAME_STEP = re.compile(r"step(\d+)_")


def graphics_requested() -> bool:
    """True if the user asked for terminal graphics and textual-image is importable."""
    if (settings().frames or "").lower() != "graphics":
        return False
    try:
        import textual_image.widget  # noqa: F401
    except ImportError:
        return False
    return True


class FrameView(Widget):
    """One image file fitted to the widget, with its name as a caption."""

    DEFAULT_CSS = """
    FrameView {
        height: 1fr;
        content-align: center top;
    }
    """

    path: reactive[Path | None] = reactive(None)
    caption: reactive[str] = reactive("")

    def render(self) -> RenderableType:
        muted = theme_style(self.app, "foreground-muted")
        if self.path is None:
            return Text(self.caption or "no frame at this step", style=muted)
        rows = max(1, self.content_size.height - 1)
        return Group(HalfBlockImage(self.path, rows),
                     Text(self.caption or self.path.name, style=muted, no_wrap=True,
                          overflow="ellipsis"))


class GraphicsFrameView(Vertical):
    """The frame through ``textual-image`` (terminal graphics), when it is installed."""

    DEFAULT_CSS = """
    GraphicsFrameView {
        height: 1fr;
    }
    GraphicsFrameView > Static {
        color: $foreground-muted;
    }
    """

    path: reactive[Path | None] = reactive(None)
    caption: reactive[str] = reactive("")

    def compose(self) -> ComposeResult:
        from textual_image.widget import Image  # optional: see graphics_requested()

        yield Image(None)
        yield Static("")

    def watch_path(self, path: Path | None) -> None:
        from textual_image.widget import Image

        self.query_one(Image).image = path

    def watch_caption(self, caption: str) -> None:
        self.query_one(Static).update(caption or "no frame at this step")


def frame_caption(frame: Path | None, step: int) -> str:
    """Says which step a frame comes from when it is an earlier step's (logger file names
    carry the step: ``step00012_env_step_00031.png``)."""
    if frame is None:
        return ""
    match = _FRAME_STEP.match(frame.name)
    if match is None or int(match.group(1)) == step:
        return frame.name
    return f"step {int(match.group(1))}'s frame (none at step {step})"
