"""How the TUI spells numbers, sizes, times and states (plain strings, no widgets)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from evaltui.contract import units
from evaltui.contract.states import RunState

STATE_COLOUR: Mapping[str, str] = {
    RunState.QUEUED: "secondary",
    RunState.STARTING: "accent",
    RunState.RUNNING: "primary",
    RunState.DONE: "success",
    RunState.FAILED: "error",
    RunState.CANCELLED: "warning",
    RunState.ABORTED: "error",
    "ok": "success",
    "error": "error",
    "timeout": "warning",
    "cancelled": "warning",
    "unreadable": "error",
}
"""Theme variable (without ``$``) that colours a run state or an episode status."""

STATE_GLYPH: Mapping[str, str] = {
    RunState.QUEUED: "◌",
    RunState.STARTING: "◐",
    RunState.RUNNING: "●",
    RunState.DONE: "✔",
    RunState.FAILED: "✘",
    RunState.CANCELLED: "⊘",
    RunState.ABORTED: "✘",
}
"""A glyph per run state, so the state reads without colour too."""

NONE = "—"


def mib(mb: float | None) -> str:
    """``512 MiB``, ``20.0 GiB``; ``—`` for None."""
    if mb is None:
        return NONE
    return f"{mb / 1024:.1f} GiB" if abs(mb) >= 1024 else f"{mb:.0f} MiB"


def metric(value: float | None, digits: int = 3) -> str:
    """A metric mean, or ``—``."""
    return NONE if value is None else f"{value:.{digits}f}"


def interval(ci: object, digits: int = 3) -> str:
    """A 95% CI as ``[lo, hi]``, or ``—``."""
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(v, int | float)
                                                           for v in ci):
        return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return NONE


def duration(seconds: float | None) -> str:
    """``0.42 s``, ``12 s``, ``3m05s``, ``2h07m``, ``3d04h`` (:func:`units.duration`)."""
    return units.duration(seconds) or NONE


def age(seconds: float | None) -> str:
    """A k9s-style age: ``45s``, ``3m``, ``2h``, ``5d``."""
    if seconds is None or seconds < 0:
        return NONE
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def parse_time(value: object) -> datetime | None:
    """An ISO 8601 time from a run file, or None if absent or malformed."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.astimezone()


def seconds_between(start: object, end: datetime) -> float | None:
    """Seconds from an ISO time to ``end``, or None."""
    begun = parse_time(start)
    return None if begun is None else (end - begun).total_seconds()


TRACEBACK = "Traceback (most recent call last):"


def first_line(text: object, limit: int = 120) -> str:
    """The line of a message that says what went wrong: its first non-empty line, or,
    when a traceback follows some words ("workers cannot start: Traceback …"), those
    words and the traceback's last line, the exception (its cause, not its first frame).
    """
    if not isinstance(text, str) or not text.strip():
        return ""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    at = next((i for i, line in enumerate(lines) if TRACEBACK in line), None)
    if at is None or at == len(lines) - 1:
        line = lines[0]
    else:
        before = " ".join([*lines[:at], lines[at].split(TRACEBACK, 1)[0]]).strip()
        line = f"{before} {lines[-1]}" if before else lines[-1]
    return line if len(line) <= limit else line[: limit - 1] + "…"
