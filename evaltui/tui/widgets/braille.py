"""Plots drawn with Unicode cells: braille lines over a shaded band, eighth-block columns.

Braille gives 2x4 dots per cell, so a 30x5 cell plot has 60x20 points: enough for a
running mean, with no plotting dependency and nothing but text in snapshots. Colours
are rich Styles the caller takes from the theme.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text

BRAILLE = 0x2800
_DOT = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
"""Dot bits by (row within the cell, column within the cell)."""
UP_EIGHTHS = " ▁▂▃▄▅▆▇█"


def band_line_plot(means: Sequence[float], lows: Sequence[float], highs: Sequence[float],
                   width: int, height: int, line: Style, band: Style) -> list[Text]:
    """``height`` lines of ``width`` cells: ``means`` (in [0, 1], one per dot column,
    stretched or sampled to fit) as a braille line over the band ``lows``..``highs``
    shaded in ``band``'s background. NaN bounds leave no band."""
    if width <= 0 or height <= 0:
        return []
    cols, rows = 2 * width, 4 * height
    n = len(means)
    dots = [[0] * width for _ in range(height)]
    shade = [[False] * width for _ in range(height)]
    previous: int | None = None
    for px in range(cols):
        if not n:
            break
        i = min(n - 1, px * n // cols)
        y = _pixel(means[i], rows)
        top, bottom = (y, y) if previous is None else (min(y, previous), max(y, previous))
        for py in range(top, bottom + 1):  # join steps so the line stays unbroken
            dots[py // 4][px // 2] |= _DOT[py % 4][px % 2]
        previous = y
        low, high = lows[i], highs[i]
        if low == low and high == high:  # not NaN
            for r in range(height):
                cell_low, cell_high = 1 - (r + 1) / height, 1 - r / height
                if low <= cell_high and high >= cell_low:
                    shade[r][px // 2] = True
    lines = []
    for r in range(height):
        text = Text(no_wrap=True, overflow="crop")
        for c in range(width):
            style = band if shade[r][c] else line
            glyph = chr(BRAILLE + dots[r][c]) if dots[r][c] else " "
            text.append(glyph, style)
        lines.append(text)
    return lines


def _pixel(value: float, rows: int) -> int:
    """Dot row of ``value`` in [0, 1] (0 at the bottom)."""
    value = 0.0 if value != value else min(1.0, max(0.0, value))
    return min(rows - 1, max(0, round((1 - value) * (rows - 1))))


def column_plot(values: Sequence[float], height: int, style: Style) -> list[Text]:
    """Vertical bars, one cell wide each, scaled so the largest fills ``height`` lines,
    resolved to an eighth of a cell."""
    peak = max(values, default=0) or 1
    eighths = [round(v / peak * height * 8) for v in values]
    lines = []
    for r in range(height):
        base = (height - 1 - r) * 8
        text = Text(no_wrap=True, overflow="crop")
        for e in eighths:
            text.append(UP_EIGHTHS[max(0, min(8, e - base))], style)
        lines.append(text)
    return lines


def stacked_columns(samples: Sequence[tuple[float, float]], width: int, height: int,
                    lower: Style, upper: Style) -> list[Text]:
    """An area plot over time (nvitop's memory history): per column a ``lower`` part and
    an ``upper`` part stacked on it, both fractions of the full height in [0, 1]. The
    newest sample is the rightmost column; missing history is blank. A cell where the
    lower part ends under the upper one is drawn lower-coloured on an upper background."""
    samples = list(samples)[-width:] if width > 0 else []
    pad = width - len(samples)
    lines = []
    for r in range(height):
        base = (height - 1 - r) * 8  # eighths below this line
        text = Text(" " * pad, no_wrap=True, overflow="crop")
        for low, high in samples:
            lo = round(min(1.0, max(0.0, low)) * height * 8) - base
            hi = round(min(1.0, max(0.0, low + high)) * height * 8) - base
            if lo >= 8:
                text.append("█", lower)
            elif lo > 0:
                text.append(UP_EIGHTHS[lo], Style(color=lower.color,
                                                  bgcolor=upper.color if hi >= 8 else None))
            elif hi > 0:
                text.append(UP_EIGHTHS[min(8, hi)], upper)
            else:
                text.append(" ")
        lines.append(text)
    return lines
