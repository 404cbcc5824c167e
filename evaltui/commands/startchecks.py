"""What `evaltui serve` and `evaltui tui` check before they start their long-lived
service: a port in range and an outputs root they can write. Said as one line (exit 2)
before anything binds a socket or takes over the screen (issue 25)."""

from __future__ import annotations

from evaltui.rundir.layout import outputs_root
from evaltui.rundir.store import outputs_problem


def start_problem(port_flag: str, port: int, zero_means: str, outputs: str | None) -> str | None:
    """The one-line reason the service cannot start, or None.

    ``port_flag`` is the flag as the user typed it, ``zero_means`` what port 0 does for
    this command (said in the message, since it differs between them)."""
    if not 0 <= port <= 65535:
        return f"{port_flag} must be 0-65535 ({zero_means}), got {port}"
    return outputs_problem(outputs_root(outputs))
