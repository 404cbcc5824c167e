"""Every shipped theme stays legible when a terminal has only 256 colours (tmux-256color
without COLORTERM): panel borders, text and muted text differ from the background there."""

from __future__ import annotations

import pytest
from rich.color import Color, ColorSystem

from evaltui.tui.themes import load_themes

PAIRS = [("panel-lighten-1", "background"), ("panel-lighten-1", "surface"),
         ("foreground", "background"), ("primary", "background"), ("error", "background")]


def eight_bit(hex_colour: str) -> int | None:
    colour = Color.parse(hex_colour[:7]).downgrade(ColorSystem.EIGHT_BIT)
    return colour.number


@pytest.mark.parametrize("theme", load_themes(), ids=lambda t: t.name)
def test_theme_is_legible_in_256_colours(theme) -> None:
    colours = theme.to_color_system().generate()
    for fg, bg in PAIRS:
        assert eight_bit(colours[fg]) != eight_bit(colours[bg]), (theme.name, fg, bg)
