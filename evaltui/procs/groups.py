"""Ending a run's process group: SIGTERM, a grace period, then SIGKILL (DESIGN §6)."""

from __future__ import annotations

import contextlib
import os
import signal
import time

from evaltui.contract.pidref import PidRef


def terminate_group(ref: PidRef, grace_sec: float = 10.0, poll_sec: float = 0.05) -> bool:
    """SIGTERM the process group led by ``ref``; SIGKILL it after ``grace_sec``.

    Returns True if the leader exited within the grace period. The group is signalled
    only while the leader is the same process (create time checked), so a reused PID is
    never hit.
    """
    if not ref.alive():
        return True
    signal_group(ref.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_sec
    while time.monotonic() < deadline:
        if not ref.alive():
            return True
        time.sleep(poll_sec)
    if ref.alive():
        signal_group(ref.pid, signal.SIGKILL)
    return False


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to a process group; a group that is gone (or not ours) is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
