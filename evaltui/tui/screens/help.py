"""HelpScreen: the keys of the screen underneath, and of the whole app, as users type them."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from evaltui.tui.keys import QUIT_BINDINGS, keys_text
from evaltui.tui.widgets.bars import theme_style
from evaltui.tui.widgets.keys_footer import KeysFooter


def _bindings(source: list[BindingType]) -> list[Binding]:
    out: list[Binding] = []
    for item in source:
        if isinstance(item, Binding):
            out.append(item)
        elif isinstance(item, tuple) and len(item) >= 3:
            out.append(Binding(item[0], item[1], item[2]))
    return out


def own_bindings(node: DOMNode) -> list[Binding]:
    """The bindings evaltui's own classes declare on ``node`` (a table's home/end/j/k),
    leaving out Textual's built-in ones (scrolling, focus, copy)."""
    found: list[Binding] = []
    for cls in type(node).__mro__:
        if cls.__module__.startswith("evaltui.") and "BINDINGS" in cls.__dict__:
            found += _bindings(list(cls.__dict__["BINDINGS"]))
    return found


class HelpScreen(ModalScreen[None]):
    """A table of keys: the screen's own first, its focused widget's, then the app's."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark", "dismiss", "Close"),
        *QUIT_BINDINGS,
    ]
    CORE_KEYS: ClassVar[tuple[str, ...]] = ("dismiss",)

    def __init__(self, under: Screen[object], intro: str) -> None:
        super().__init__()
        self.under = under
        self.intro = intro

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield Static(self._render_help())
        yield KeysFooter()

    def _render_help(self) -> Table:
        app = self.app
        table = Table(box=None, show_header=False, padding=(0, 2), expand=True)
        table.add_column(style=theme_style(app, "accent", bold=True), no_wrap=True)
        table.add_column()
        table.add_row(Text(type(self.under).__name__.removesuffix("Screen").lower(),
                           style=theme_style(app, "primary", bold=True)), Text(self.intro))
        table.add_row("", "")
        focused = self.under.focused
        sources = [_bindings(list(self.under.BINDINGS)),
                   own_bindings(focused) if focused is not None else [],
                   _bindings(list(app.BINDINGS))]
        seen: set[str] = set()
        for source in sources:
            for binding in source:
                if binding.description in seen or not binding.description:
                    continue
                seen.add(binding.description)
                # Text, not markup: "[/]" is a key here, not a closing tag.
                table.add_row(Text(binding.key_display or keys_text(binding.key)),
                              Text(binding.tooltip or binding.description))
        table.add_row("ctrl+p", "command palette (themes, quit, …)")
        return table
