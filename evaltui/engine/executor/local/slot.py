"""WorkerSlot: one of the pool's K slots -- its worker process (one at a time), the
episode that worker runs, the one dealt ahead behind it, and the messages it is sent."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltui.engine.executor.local.zygote import ForkedChild
from evaltui.engine.executor.watchdog import LogWatch


def tell(child: ForkedChild, *message: Any) -> None:
    """Send a control message (``("episode", i)``, ``("stop",)``) to a worker."""
    try:
        child.conn.send(message)
    except OSError:
        pass  # it just died; its closed pipe reports the death on the next wait


@dataclass
class WorkerSlot:
    worker_id: int
    child: ForkedChild | None = None
    ready: bool = False
    started_at: float = 0.0
    index: int | None = None
    """The episode the worker runs (or, dealt ahead, starts as soon as it reads it)."""
    ahead: int | None = None
    """An episode dealt ahead: in the worker's pipe behind ``index``, not started."""
    dealt_at: float = 0.0
    watch: LogWatch | None = None

    def begin(self, index: int, episode_log: Callable[[int], Path] | None) -> None:
        """``index`` is the episode the worker runs from now (its log watched, if any)."""
        self.index, self.dealt_at = index, time.monotonic()
        self.watch = LogWatch(episode_log(index)) if episode_log is not None else None

    def send_episode(self, index: int) -> None:
        assert self.child is not None
        tell(self.child, "episode", index)

    def kill(self) -> ForkedChild:
        """SIGKILL the worker and reap it; the slot has no worker after it."""
        child = self.child
        assert child is not None
        child.send_signal(signal.SIGKILL)
        child.end(grace_sec=0.5)
        self.child = None
        return child
