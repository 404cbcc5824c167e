"""Memory sizes as people read them: one formatter for the scheduler's reasons and the UI."""

from __future__ import annotations

NONE = "—"


def gib(mb: float | None, *, unit: bool = True) -> str:
    """MiB as GiB with one decimal (``"20.0 GiB"``, or ``"20.0"`` without the unit); ``—``
    for None."""
    if mb is None:
        return NONE
    return f"{mb / 1024:.1f}{' GiB' if unit else ''}"
