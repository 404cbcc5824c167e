"""Memory sizes and durations as people read them: one formatter each for the scheduler's
reasons, the TUI and the HTML report."""

from __future__ import annotations

import math
from typing import Any

NONE = "—"


def gib(mb: float | None, *, unit: bool = True) -> str:
    """MiB as GiB with one decimal (``"20.0 GiB"``, or ``"20.0"`` without the unit); ``—``
    for None."""
    if mb is None:
        return NONE
    return f"{mb / 1024:.1f}{' GiB' if unit else ''}"


def duration(seconds: Any, *, words: bool = False) -> str | None:
    """How long ``seconds`` is, None if unknown (not a finite number >= 0). Compact, for
    the TUI's columns: ``0.42 s``, ``12 s``, ``3m05s``, ``2h07m``, ``3d04h``; in ``words``,
    for the HTML report: ``12.3 s``, ``3 min 05 s``, ``1 h 02 min``."""
    if not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds < 0:
        return None
    if seconds < 60:
        return f"{seconds:.1f} s" if words else \
            f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes, secs = divmod(int(round(seconds)) if words else int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s" if words else f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if words:
        return f"{hours} h {minutes:02d} min"
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
