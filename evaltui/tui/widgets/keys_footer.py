"""KeysFooter: a screen's keys in one line that keeps the ones that matter when narrow.

Textual's Footer shows the active bindings in the order the focus chain gives them
(focused widget, screen, app), and a narrow terminal cuts whatever comes last, which is
the app's quit and help. This footer keeps the same look (compact) but chooses by rank:
quit first, then help (the way to every other key), then the screen's ``CORE_KEYS``
(actions, most important first), then the rest in order; the command palette hint goes
first when room runs out. What is kept is shown in binding order, so a key never moves
when another one is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from evaltui.tui.keys import QUIT_ACTIONS

HELP_ACTIONS = frozenset({"help", "app.help"})


@dataclass(frozen=True)
class FooterEntry:
    """One key as the footer shows it."""

    key: str
    display: str
    description: str
    action: str
    enabled: bool = True
    tooltip: str = ""

    @property
    def width(self) -> int:
        """Cells taken in the compact style: key, a space, words, then a margin."""
        return cell_len(self.display) + 1 + cell_len(self.description) + 1


PALETTE_EXTRA = 1
"""The palette hint's border on its left, beyond its entry width."""


def fit_keys(entries: Sequence[FooterEntry], width: int, core: Sequence[str] = (),
             palette: FooterEntry | None = None) -> tuple[list[FooterEntry], bool]:
    """The entries a footer ``width`` cells wide shows, and whether the palette fits too.

    Ranks: quit, help, the ``core`` actions in their order, then the rest in display
    order. Lowest ranks are dropped until the rest fit; the palette only shows when
    every entry kept so far leaves room for it.
    """
    def rank(position: int, entry: FooterEntry) -> tuple[int, int]:
        if entry.action in QUIT_ACTIONS:
            return (0, 0)
        if entry.action in HELP_ACTIONS:
            return (1, 0)
        if entry.action in core:
            return (2, list(core).index(entry.action))
        return (3, position)

    ranked = sorted(range(len(entries)), key=lambda i: rank(i, entries[i]))
    kept: set[int] = set()
    used = 0
    for index in ranked:
        cost = entries[index].width
        if used + cost <= width:
            kept.add(index)
            used += cost
    shown = [e for i, e in enumerate(entries) if i in kept]
    fits_palette = (palette is not None and len(kept) == len(entries)
                    and used + palette.width + PALETTE_EXTRA <= width)
    return shown, fits_palette


class KeysFooter(Footer):
    """The screen's footer: quit and the core keys always, the rest as room allows."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, compact=True)
        self._width = 0

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        active = self.screen.active_bindings
        by_action: dict[str, FooterEntry] = {}
        for key, (_node, binding, enabled, tooltip) in active.items():
            if not binding.show:
                continue
            entry = FooterEntry(key, self.app.get_key_display(binding), binding.description,
                                binding.action, enabled, tooltip)
            # One entry per action, its first key, but a plain key over a ctrl chord:
            # ``q`` rather than ``^q`` for quit (^q shows where q is typed into a field).
            known = by_action.get(binding.action)
            if known is None or (known.display.startswith("^")
                                 and not entry.display.startswith("^")):
                by_action[binding.action] = entry
        entries = list(by_action.values())
        palette = self._palette_entry()
        width = self.size.width or self.app.size.width
        self._width = width
        core = tuple(getattr(self.screen, "CORE_KEYS", ()))
        shown, with_palette = fit_keys(entries, width, core, palette)
        for entry in shown:
            yield FooterKey(entry.key, entry.display, entry.description, entry.action,
                            disabled=not entry.enabled,
                            tooltip=entry.tooltip).data_bind(compact=Footer.compact)
        if with_palette and palette is not None:
            yield FooterKey(palette.key, palette.display, palette.description,
                            palette.action, classes="-command-palette",
                            tooltip=palette.tooltip)

    def _palette_entry(self) -> FooterEntry | None:
        if not (self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE):
            return None
        found = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        if found is None:
            return None
        binding = found.binding
        return FooterEntry(binding.key, self.app.get_key_display(binding), binding.description,
                           binding.action, True, binding.tooltip or binding.description)

    @property
    def shown_keys(self) -> list[tuple[str, str]]:
        """(key as shown, description) of each key in the footer now, palette included."""
        return [(k.key_display, k.description) for k in self.query(FooterKey)]

    def on_resize(self, event: events.Resize) -> None:
        if self._bindings_ready and event.size.width != self._width:
            self.call_after_refresh(self.recompose)
