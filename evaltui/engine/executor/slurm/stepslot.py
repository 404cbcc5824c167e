"""StepSlot: one of the Slurm executor's K slots -- its worker step (one at a time): the
``srun`` process on the run's node that holds the step, and the channel to the worker
inside it once that worker has said hello."""

from __future__ import annotations

import collections
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import IO

from evaltui.engine.executor.slots import Slot

NODE_FAILURE = "Node failure"
"""What srun prints when the node its step ran on is lost (and it still exits 0)."""


@dataclass
class SrunStep:
    """One ``srun`` of a worker step: the process, its stderr relayed to the run's own
    (run.log) with the last lines kept to say why it ended, and what its worker said."""

    proc: subprocess.Popen[bytes]
    start: int
    conn: Connection | None = None
    pid: int | None = None
    step_id: str | None = None
    lost_at: float | None = None
    """When its channel closed without the slot having stopped it."""
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=8))

    def relay(self, prefix: str) -> None:
        """Copy srun's stderr to ours, on a daemon thread, until srun ends."""
        stream = self.proc.stderr
        assert stream is not None
        threading.Thread(target=self._relay, args=(stream, prefix), daemon=True,
                         name=f"{prefix}-stderr").start()

    def _relay(self, stream: IO[bytes], prefix: str) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip()
            self.tail.append(line)
            print(f"{prefix}: {line}", file=sys.stderr, flush=True)
        stream.close()

    def ended(self) -> bool:
        return self.proc.poll() is not None

    def node_failed(self) -> bool:
        return any(NODE_FAILURE in line for line in self.tail)

    def describe_end(self) -> str:
        """How srun ended (its status means little: 0 after a node failure)."""
        code = self.proc.poll()
        said = next((ln for ln in reversed(self.tail) if "error" in ln.lower()), "")
        how = "still running" if code is None else f"srun exit status {code}"
        return f"{how}: {said}" if said else how

    def close_conn(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@dataclass
class StepSlot(Slot):
    step: SrunStep | None = None
    starts: int = 0
