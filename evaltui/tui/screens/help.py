"""HelpScreen: the keys of the screen underneath, and of the whole app."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from evaltui.tui.widgets.bars import theme_style

KEY_NAMES = {"slash": "/", "question_mark": "?", "plus": "+", "minus": "-", "space": "space",
             "escape": "esc", "enter": "enter", "left": "←", "right": "→", "up": "↑",
             "down": "↓", "home": "home", "end": "end", "ctrl+p": "ctrl+p", "ctrl+q": "ctrl+q"}


def _bindings(source: list[BindingType]) -> list[Binding]:
    out: list[Binding] = []
    for item in source:
        if isinstance(item, Binding):
            out.append(item)
        elif isinstance(item, tuple) and len(item) >= 3:
            out.append(Binding(item[0], item[1], item[2]))
    return out


class HelpScreen(ModalScreen[None]):
    """A table of keys: the screen's own first, then the app's."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def __init__(self, under: Screen[object], intro: str) -> None:
        super().__init__()
        self.under = under
        self.intro = intro

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield Static(self._render_help())

    def _render_help(self) -> Table:
        app = self.app
        table = Table(box=None, show_header=False, padding=(0, 2), expand=True)
        table.add_column(style=theme_style(app, "accent", bold=True), no_wrap=True)
        table.add_column()
        table.add_row(Text(type(self.under).__name__.removesuffix("Screen").lower(),
                           style=theme_style(app, "primary", bold=True)), Text(self.intro))
        table.add_row("", "")
        seen: set[str] = set()
        for source in (_bindings(list(self.under.BINDINGS)), _bindings(list(app.BINDINGS))):
            for binding in source:
                if binding.description in seen or not binding.description:
                    continue
                seen.add(binding.description)
                keys = " ".join(KEY_NAMES.get(k.strip(), k.strip())
                                for k in binding.key.split(","))
                table.add_row(keys, binding.description)
        table.add_row("ctrl+p", "command palette (themes, quit, …)")
        return table
