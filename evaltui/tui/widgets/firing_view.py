"""FiringView: the node firings of one step, inputs and outputs pretty-printed.

Logged values carry stand-ins for what was too big or not data (``$array``, ``$frame``,
``$object``, see the logger); they are shown as short readable tokens, not as nested
dicts. One card per record; the current one (``n``/``N`` move it) is marked ``▸`` with
its heading in reverse video, not by colour alone, and scrolled into view. Cards are
reused between steps, so playing a replay does not rebuild the widget tree every step.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.pretty import Pretty
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from evaltui.runview.replay import Firing
from evaltui.tui.widgets.bars import theme_style


class StandIn:
    """A logged stand-in shown as a bare token by ``rich.pretty``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def present(value: Any, depth: int = 0) -> Any:
    """A logged value with its stand-ins replaced by readable tokens."""
    if depth > 12:
        return value
    if isinstance(value, dict):
        if "$array" in value and isinstance(value["$array"], dict):
            a = value["$array"]
            shape = "×".join(str(d) for d in a.get("shape") or [])
            return StandIn(f"array[{shape} {a.get('dtype', '?')} "
                           f"{a.get('min', '?')}..{a.get('max', '?')}]")
        if isinstance(value.get("$frame"), str):
            shape = "×".join(str(d) for d in value.get("shape") or [])
            return StandIn(f"frame[{shape}] {value['$frame']}")
        if isinstance(value.get("$object"), str) and len(value) == 1:
            return StandIn(f"<{value['$object']}>")
        return {k: present(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [present(v, depth + 1) for v in value]
    return value


class FiringCard(Static):
    """One log record: node, event, duration, then its inputs, outputs or error."""

    DEFAULT_CSS = """
    FiringCard {
        border-left: wide $panel;
        padding: 0 1;
        margin-bottom: 1;
    }
    FiringCard.-current {
        border-left: wide $accent;
        background: $boost;
    }
    FiringCard.-error {
        border-left: wide $error;
    }
    FiringCard.-error.-current {
        background: $error 15%;
    }
    """

    def show(self, firing: Firing, current: bool = False) -> None:
        self.set_class(firing.is_error, "-error")
        self.set_class(current, "-current")
        self.update(self._render_firing(firing, current))

    def _render_firing(self, firing: Firing, current: bool) -> RenderableType:
        app = self.app
        rec = firing.record
        event = firing.event
        head = Text()
        head.append("▸ " if current else "  ", style=theme_style(app, "accent", bold=True))
        if rec.get("node"):
            head.append(f"{rec['node']}  ", style=theme_style(app, "primary", bold=True))
        head.append(event, style=theme_style(app, "error" if firing.is_error else "secondary",
                                             bold=True))
        if rec.get("nodeset"):
            head.append(f"  on {rec['nodeset']}", style=theme_style(app, "foreground-muted"))
        if isinstance(rec.get("dur_ms"), int | float):
            head.append(f"  {rec['dur_ms']:.2f} ms", style=theme_style(app, "foreground-muted"))
        head.append(f"  line {firing.line + 1}", style=theme_style(app, "foreground-muted"))
        if current:
            head.stylize("reverse", 2)
        parts: list[RenderableType] = [head]
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style=theme_style(app, "foreground-muted"), no_wrap=True)
        grid.add_column(ratio=1)
        for label in ("inputs", "outputs"):
            ports = rec.get(label)
            if isinstance(ports, dict):
                for port, value in ports.items():
                    grid.add_row(f"{'in' if label == 'inputs' else 'out'} {port}",
                                 Pretty(present(value), max_length=16, max_string=300,
                                        overflow="fold"))
            elif ports is not None:
                grid.add_row(label, Pretty(present(ports), max_length=16, max_string=300))
        if grid.row_count:
            parts.append(grid)
        if rec.get("error"):
            parts.append(Text(str(rec["error"]), style=theme_style(app, "error")))
        if event == "corrupt" and rec.get("raw"):
            parts.append(Text(str(rec["raw"]), style=theme_style(app, "foreground-muted")))
        return Group(*parts)


class FiringView(VerticalScroll, can_focus=False):
    """The records of the current step, one card each; ``current`` is highlighted.

    Never focused: a focused scroll view takes ←/→/home/end for scrolling whenever its
    content overflows, so the replay's own keys would stop working on long steps.
    The replay scrolls it with pgup/pgdn instead."""

    DEFAULT_CSS = """
    FiringView {
        height: 1fr;
        padding: 0 1;
    }
    FiringView > .firing-note {
        color: $foreground-muted;
    }
    """

    def compose(self) -> ComposeResult:
        yield Static("", classes="firing-note")

    def show(self, firings: list[Firing], total: int, current: int) -> None:
        """Show ``firings`` (of ``total`` in the step) with card ``current`` highlighted."""
        cards = list(self.query(FiringCard))
        if len(cards) < len(firings):
            extra = [FiringCard() for _ in range(len(firings) - len(cards))]
            self.mount_all(extra)
            cards += extra
        for i, card in enumerate(cards):
            card.display = i < len(firings)
            if i < len(firings):
                card.show(firings[i], current=i == current)
        note = self.query_one(".firing-note", Static)
        if not firings:
            note.update("no records at this step")
        elif total > len(firings):
            note.update(f"showing the first {len(firings)} of {total} records of this step")
        else:
            note.update("")
        note.display = bool(not firings or total > len(firings))
        if 0 <= current < len(firings):
            self.call_after_refresh(cards[current].scroll_visible, animate=False)
