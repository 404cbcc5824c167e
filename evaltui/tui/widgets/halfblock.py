"""A logged frame as terminal cells: each cell is two pixels stacked, drawn as "▀".

The upper pixel is the glyph's foreground, the lower one its background, so any
true-colour terminal shows a frame at twice its cell height without a graphics
protocol. The image is downscaled to fit (box filter: frames are small pixel art,
averaging keeps thin walls visible better than dropping pixels).
"""

from __future__ import annotations

from functools import lru_cache

from PIL import Image
from rich.color import Color
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style

from evaltui.runview.frames import FrameRef

UPPER_HALF = "▀"


@lru_cache(maxsize=64)
def _pixels(frame: FrameRef, mtime_ns: int, cols: int, rows: int) -> tuple[int, int, bytes]:
    """RGB pixels of ``frame`` scaled to fit ``cols`` x ``2*rows``, aspect kept."""
    rgb = frame.image()
    scale = min(cols / rgb.width, (2 * rows) / rgb.height)
    width = max(1, round(rgb.width * scale))
    height = max(2, round(rgb.height * scale))
    height += height % 2  # whole cells
    small = rgb.resize((width, height), Image.Resampling.BOX)
    return width, height, small.tobytes()


class HalfBlockImage:
    """A rich renderable drawing a frame with half-block cells, fitted to the width."""

    def __init__(self, frame: FrameRef, max_rows: int) -> None:
        self.frame = frame
        self.max_rows = max(1, max_rows)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        try:
            width, height, data = _pixels(self.frame, self.frame.stamp(), options.max_width,
                                          self.max_rows)
        except (OSError, ValueError) as exc:
            yield Segment(f"cannot show {self.frame.name}: {exc}")
            return
        for y in range(0, height, 2):
            top = y * width * 3
            bottom = (y + 1) * width * 3
            for x in range(width):
                t, b = top + 3 * x, bottom + 3 * x
                style = Style(color=Color.from_rgb(*data[t : t + 3]),
                              bgcolor=Color.from_rgb(*data[b : b + 3]))
                yield Segment(UPPER_HALF, style)
            yield Segment.line()
