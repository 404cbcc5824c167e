"""contract/units.py: one duration formatter, compact for the TUI's columns and in words for
the HTML report; a time that is no duration (unknown, negative, infinite) is None in both."""

from __future__ import annotations

import pytest

from evaltui.contract.units import duration
from evaltui.tui import display


@pytest.mark.parametrize(("seconds", "compact", "words"), [
    (0.42, "0.42 s", "0.4 s"), (12.3, "12 s", "12.3 s"), (185, "3m05s", "3 min 05 s"),
    (119.6, "1m59s", "2 min 00 s"), (3720, "1h02m", "1 h 02 min"),
    (3 * 86400 + 4 * 3600, "3d04h", "76 h 00 min")])
def test_both_styles(seconds: float, compact: str, words: str) -> None:
    assert duration(seconds) == compact and display.duration(seconds) == compact
    assert duration(seconds, words=True) == words


@pytest.mark.parametrize("seconds", [None, "12", -5.0, float("inf"), float("nan")])
def test_no_duration_is_none(seconds: object) -> None:
    assert duration(seconds) is None and duration(seconds, words=True) is None
    assert display.duration(seconds) == display.NONE  # type: ignore[arg-type]
