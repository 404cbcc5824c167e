"""A process identity that survives PID reuse (pid + create time).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

_CREATE_TIME_TOLERANCE_SEC = 0.5


@dataclass(frozen=True)
class PidRef:
    """A process identity that survives PID reuse: pid plus its create time."""

    pid: int
    create_time: float

    @classmethod
    def current(cls) -> PidRef:
        """This process."""
        return cls.of(os.getpid())

    @classmethod
    def of(cls, pid: int) -> PidRef:
        """A live process (raises ``psutil.NoSuchProcess`` if there is none)."""
        return cls(pid, psutil.Process(pid).create_time())

    def alive(self) -> bool:
        """True if this very process still runs (zombies and reused PIDs count as dead)."""
        if self.pid <= 0:
            return False
        try:
            proc = psutil.Process(self.pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return False
            return abs(proc.create_time() - self.create_time) <= _CREATE_TIME_TOLERANCE_SEC
        except psutil.Error:  # gone, or not ours to inspect: either way not our run
            return False
