"""Keys every screen shares: quit, and how a bound key reads to the person typing it.

One quit key works on every screen: ``q`` wherever it is not typed into a field, and
``ctrl+q`` everywhere (forms included). Non-modal screens get both from the app's
bindings; a modal screen stops the app's bindings from reaching its footer, so each
modal lists :data:`QUIT_BINDINGS` itself.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.keys import key_to_character

QUIT_ACTIONS = frozenset({"quit", "app.quit"})
QUIT_BINDINGS = [
    Binding("q", "app.quit", "Quit"),
    # priority: a focused Input would take ``q`` and could not take this one.
    Binding("ctrl+q", "app.quit", "Quit", priority=True),
]
"""The quit keys of a modal screen (the app's own are the same keys, action ``quit``)."""

KEY_TEXT = {"slash": "/", "question_mark": "?", "plus": "+", "minus": "-", "space": "space",
            "escape": "esc", "enter": "enter", "left": "←", "right": "→", "up": "↑",
            "down": "↓", "home": "home", "end": "end", "pageup": "pgup", "pagedown": "pgdn",
            "tab": "tab"}
"""Names that read better than the character (or that have none)."""


def key_text(key: str) -> str:
    """``left_square_bracket`` -> ``[``: a key as the user types it (for help and hints)."""
    key = key.strip()
    if key in KEY_TEXT:
        return KEY_TEXT[key]
    modifiers, _, base = key.rpartition("+")
    if modifiers:
        return f"{modifiers}+{key_text(base)}"
    char = key_to_character(key)
    return char if char is not None and char.isprintable() and char != " " else key


def keys_text(keys: str) -> str:
    """A binding's comma-separated keys as typed: ``escape,question_mark`` -> ``esc ?``."""
    return " ".join(key_text(k) for k in keys.split(",") if k.strip())
