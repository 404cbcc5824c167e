"""prctl helpers (Linux): PR_SET_PDEATHSIG, so a child dies with its parent, and PR_SET_NAME."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from functools import lru_cache

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def prepare_pdeathsig() -> None:
    """Load libc now, so that a child's ``preexec_fn`` arming the signal does one prctl
    and nothing else (no library search between fork and exec)."""
    if sys.platform.startswith("linux"):
        _libc()


def arm_pdeathsig(sig: int = signal.SIGKILL, expected_parent: int | None = None) -> bool:
    """Arm the death signal; returns False where the platform has no prctl.

    If the parent already died before arming (we were reparented), exit at once: the
    kernel would never send the signal.
    """
    if not sys.platform.startswith("linux"):
        return False
    if _libc().prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)
    return True


def set_process_name(name: str) -> None:
    """The name ``ps -o comm``, ``top`` and ``pgrep`` show (15 bytes at most on Linux).

    Forked processes keep their parent's command line; this tells them apart.
    """
    if sys.platform.startswith("linux"):
        _libc().prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
