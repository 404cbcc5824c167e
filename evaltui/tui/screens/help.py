"""HelpScreen: the keys of the screen underneath, and of the whole app, as users type them."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group
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

    def _render_help(self) -> Group:
        app = self.app
        rows = self._key_rows()
        # Two key columns where one would not fit the screen (80x24: the queue's 18 keys).
        pairs = len(rows) + 4 > max(app.size.height - 8, 8)
        table = Table(box=None, show_header=False, padding=(0, 2), expand=True)
        for _ in range(2 if pairs else 1):
            table.add_column(style=theme_style(app, "accent", bold=True), no_wrap=True)
            table.add_column()
        if pairs:
            half = (len(rows) + 1) // 2
            for left, right in zip(rows[:half], [*rows[half:], ("", "")], strict=False):
                table.add_row(*left, *right)
        else:
            for row in rows:
                table.add_row(*row)
        title = Text(type(self.under).__name__.removesuffix("Screen").lower(),
                     style=theme_style(app, "primary", bold=True))
        return Group(Text.assemble(title, "  ", self.intro), Text(""), table)

    def _key_rows(self) -> list[tuple[Text | str, Text | str]]:
        """(keys as typed, what they do): the screen's, its focused widget's, the app's;
        a key shown inside another's combined display (``+/-``) is not listed again."""
        focused = self.under.focused
        sources = [_bindings(list(self.under.BINDINGS)),
                   own_bindings(focused) if focused is not None else [],
                   _bindings(list(self.app.BINDINGS))]
        seen: set[str] = set()
        shown_keys: set[str] = set()
        rows: list[tuple[Text | str, Text | str]] = []
        for source in sources:
            for binding in source:
                if binding.description in seen or not binding.description:
                    continue
                keys = binding.key_display or keys_text(binding.key)
                if not binding.key_display and keys in shown_keys:
                    continue
                seen.add(binding.description)
                if binding.key_display:
                    shown_keys.update(binding.key_display.split("/"))
                # Text, not markup: "[/]" is a key here, not a closing tag.
                rows.append((Text(keys), Text(binding.tooltip or binding.description)))
        rows.append(("ctrl+p", "command palette (themes, quit, …)"))
        return rows
