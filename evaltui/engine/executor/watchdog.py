"""Hung-step detection: a busy episode whose ``log.jsonl`` stopped growing.

A node that blocks for good cannot end its own step, so the dealing core watches each busy
episode's log, which grows within 50 ms of every step's end (DESIGN §2). Once the
episode has started and its log has not grown for ``per_step_budget_sec`` plus
:data:`HUNG_STEP_GRACE_SEC`, the core kills the worker and records the episode
``timeout``. Before the first record the env is still in ``set_episode``: that phase is
bounded by its own budget (a scene load may take far longer than a step).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

HUNG_STEP_GRACE_SEC = 1.0  # logging and scheduling slack on top of the step budget
MTIME_SLACK_SEC = 0.02
"""A file's mtime comes from the kernel's coarse clock, up to a tick (4 ms here) behind
``time.time()``: a log written just after the deal can carry an mtime before it."""


@dataclass
class LogWatch:
    """The growth of one busy episode's log since the episode was dealt."""

    path: Path
    dealt_wall: float = field(default_factory=time.time)
    size: int = -1
    grew_at: float = field(default_factory=time.monotonic)

    dealt_at: float = field(default_factory=time.monotonic)

    def stall(self, now: float) -> tuple[str, float]:
        """(``"reset"``, seconds since the deal) while the env resets -- its log is still
        empty -- else (``"step"``, seconds since the log last grew)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return "reset", now - self.dealt_at
        # A log older than the deal is an earlier attempt's (retry, resume); an empty one
        # means the env is still resetting (episode_start is logged once set_episode returns).
        size = st.st_size if st.st_mtime >= self.dealt_wall - MTIME_SLACK_SEC else 0
        if size == 0:
            return "reset", now - self.dealt_at
        if size != self.size:
            self.size, self.grew_at = size, now
            return "step", 0.0
        return "step", now - self.grew_at

    def started(self) -> bool:
        """Whether a worker began this attempt: its log was opened (before the env's reset)
        since the deal; an older one is an earlier attempt's."""
        try:
            return os.stat(self.path).st_mtime >= self.dealt_wall - MTIME_SLACK_SEC
        except FileNotFoundError:
            return False

    def hung_reason(self, now: float, *, step_sec: float | None,
                    reset_sec: float | None) -> str | None:
        """Why the episode counts as hung -- the start of its ``timeout`` error -- or None
        while it is within its budget (``reset_sec`` during the reset, else ``step_sec``)."""
        phase, stalled = self.stall(now)
        resetting = phase == "reset"
        budget, what = ((reset_sec, "reset_budget_sec") if resetting
                        else (step_sec, "per_step_budget_sec"))
        if budget is None or stalled <= budget + HUNG_STEP_GRACE_SEC:
            return None
        return (f"{'set_episode (env reset)' if resetting else 'a step'} made no progress "
                f"for {stalled:.1f} s, over {what} {budget} "
                f"({'the env' if resetting else 'a node'} is blocking)")
