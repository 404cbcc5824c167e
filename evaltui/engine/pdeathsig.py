"""PR_SET_PDEATHSIG: let the kernel SIGKILL this process when its parent dies (Linux)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def arm_pdeathsig(sig: int = signal.SIGKILL, expected_parent: int | None = None) -> bool:
    """Arm the death signal; returns False where the platform has no prctl.

    If the parent already died before arming (we were reparented), exit at once: the
    kernel would never send the signal.
    """
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)
    return True
