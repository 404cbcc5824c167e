"""WorkerSlot: one of the local pool's K slots -- its worker process (one at a time) next
to the episode state the dealing core keeps (what the worker is sent and answers:
engine/executor/workerchannel.py)."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from evaltui.engine.executor.local.zygote import ForkedChild
from evaltui.engine.executor.slots import Slot


@dataclass
class WorkerSlot(Slot):
    child: ForkedChild | None = None
    started_at: float = 0.0

    def kill(self) -> ForkedChild:
        """SIGKILL the worker and reap it; the slot has no worker after it."""
        child = self.child
        assert child is not None
        child.send_signal(signal.SIGKILL)
        child.end(grace_sec=0.5)
        self.child = None
        return child
