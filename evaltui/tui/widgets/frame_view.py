"""FrameView: the frame of the current step, drawn with half-block cells.

Half blocks work in any true-colour terminal and in snapshots. When the optional
``textual-image`` package is installed and ``EVALTUI_FRAMES=graphics`` is set, the
frame is shown through it instead (sixel / kitty protocols, full resolution).
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from evaltui.contract.settings import settings
from evaltui.runview.frames import FrameRef
from evaltui.tui.widgets.bars import theme_style
from evaltui.tui.widgets.halfblock import HalfBlockImage


def graphics_requested() -> bool:
    """True if the user asked for terminal graphics and textual-image is importable."""
    if (settings().frames or "").lower() != "graphics":
        return False
    try:
        # optional: textual_image (the textual-image package; no extra)
        import textual_image.widget  # noqa: F401
    except ImportError:
        return False
    return True


class FrameView(Widget):
    """One logged frame fitted to the widget, with its name as a caption."""

    DEFAULT_CSS = """
    FrameView {
        height: 1fr;
        content-align: center top;
    }
    """

    path: reactive[FrameRef | None] = reactive(None)
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

    path: reactive[FrameRef | None] = reactive(None)
    caption: reactive[str] = reactive("")

    def compose(self) -> ComposeResult:
        # optional: textual_image (the textual-image package; no extra)
        from textual_image.widget import Image

        yield Image(None)
        yield Static("")

    def watch_path(self, path: FrameRef | None) -> None:
        # optional: textual_image (the textual-image package; no extra)
        from textual_image.widget import Image

        # textual-image takes a file name or a PIL image (a tiled frame is not a file).
        image = None if path is None else path.path if path.at is None else _image_or_none(path)
        self.query_one(Image).image = image

    def watch_caption(self, caption: str) -> None:
        self.query_one(Static).update(caption or "no frame at this step")


def _image_or_none(frame: FrameRef) -> object:
    try:
        return frame.image()
    except OSError:
        return None


def frame_caption(frame: FrameRef | None, step: int) -> str:
    """The frame's name, or which step it comes from when it is an earlier step's."""
    if frame is None:
        return ""
    if frame.step == step:
        return frame.name
    return f"step {frame.step}'s frame (none at step {step})"
