"""Sub-cell bars (nvitop style) and theme-coloured rich styles for rendered text.

Rich text inside widgets cannot use CSS variables, so widgets ask the running app's
theme for the colour of a variable (``success``, ``error``…) at render time and
re-render when the theme changes: colours still come from the theme files only.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.color import Color as RichColor
from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.color import Color, ColorParseError
from textual.widget import Widget

EIGHTHS = " ▏▎▍▌▋▊▉"
FULL = "█"


class ThemedWidget(Widget):
    """A widget whose rendering is in theme colours: drawn again when the theme changes."""

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _: self.refresh())


def theme_colour(app: App[object], variable: str) -> RichColor:
    """A theme variable's colour as rich needs it: opaque (alpha blended on background)."""
    colours = app.theme_variables
    try:
        colour = Color.parse(colours.get(variable) or colours["foreground"])
    except (ColorParseError, KeyError):  # e.g. "auto 60%", relative to what is behind
        colour = Color.parse(colours.get("foreground", "#FFFFFF"))
    if colour.a < 1:
        background = Color.parse(colours.get("background", "#000000"))
        colour = background.blend(colour.with_alpha(1.0), colour.a)
    return colour.rich_color


_STYLES: dict[tuple[str, str, bool, str | None], Style] = {}
"""Styles by (theme, variable, bold, background): a table repaints hundreds of cells a
second, and parsing their colours each time showed up in the run-screen benchmark."""


def theme_style(app: App[object], variable: str, *, bold: bool = False,
                background: str | None = None) -> Style:
    """A rich Style coloured by a theme variable, e.g. ``theme_style(app, "error")``."""
    key = (app.theme, variable, bold, background)
    style = _STYLES.get(key)
    if style is None:
        bgcolor = theme_colour(app, background) if background else None
        style = _STYLES[key] = Style(color=theme_colour(app, variable), bgcolor=bgcolor,
                                     bold=bold)
    return style


def level_variable(fraction: float, warn: float = 0.7, high: float = 0.9) -> str:
    """The theme variable of a usage level: success, then warning, then error."""
    if fraction >= high:
        return "error"
    if fraction >= warn:
        return "warning"
    return "success"


def stacked_bar(width: int, parts: Sequence[tuple[float, Style]], total: float,
                empty: Style) -> Text:
    """A bar ``width`` cells wide with consecutive parts, each resolved to 1/8 of a cell.

    ``parts`` are (amount, style) in the units of ``total``; the rest is ``empty`` track.
    A cell where one part ends and the next begins is drawn with an eighth-block glyph
    in the first part's colour on the next one's, so narrow bars still read precisely.
    """
    text = Text(no_wrap=True, overflow="crop")
    if width <= 0:
        return text
    total = total if total > 0 else 1.0
    limit = width * 8
    ends: list[int] = []  # cumulative end of each part, in eighths of a cell
    edge = 0
    for amount, _ in parts:
        edge = min(limit, edge + max(0, round(amount / total * limit)))
        ends.append(edge)
    colours = [style.color for _, style in parts] + [empty.color]
    track = Style(color=empty.color)

    def part_at(eighth: int) -> int:
        for k, end in enumerate(ends):
            if eighth < end:
                return k
        return len(ends)  # the empty track

    for cell in range(width):
        first = part_at(cell * 8)
        last = part_at(cell * 8 + 7)
        if first == last:
            if first == len(ends):
                text.append("░", track)
            else:
                text.append(FULL, Style(color=colours[first]))
            continue
        split = ends[first] - cell * 8  # eighths of this cell the first part fills
        behind = colours[last] if last < len(ends) else empty.color
        text.append(EIGHTHS[split], Style(color=colours[first], bgcolor=behind))
    return text
