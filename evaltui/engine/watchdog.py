"""Hung-step detection: a busy episode whose ``log.jsonl`` stopped growing.

A node that blocks for good cannot end its own step, so the pool watches each busy
episode's log, which grows at every step's end (DESIGN §2). Once the episode has
started and its log has not grown for ``per_step_budget_sec`` plus
:data:`HUNG_STEP_GRACE_SEC`, the pool kills the worker and records the episode
``timeout``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

HUNG_STEP_GRACE_SEC = 1.0  # logging and scheduling slack on top of the step budget


@dataclass
class LogWatch:
    """The growth of one busy episode's log since the episode was dealt."""

    path: Path
    dealt_wall: float = field(default_factory=time.time)
    size: int = -1
    grew_at: float = field(default_factory=time.monotonic)

    def stalled_for(self, now: float) -> float:
        """Seconds since the log last grew; 0 while it grows or before the first step."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return 0.0
        # A log older than the deal is an earlier attempt's (retry, resume); an empty one
        # means the env is still resetting, which is not a step.
        size = st.st_size if st.st_mtime >= self.dealt_wall else 0
        if size == 0:
            return 0.0
        if size != self.size:
            self.size, self.grew_at = size, now
            return 0.0
        return now - self.grew_at
