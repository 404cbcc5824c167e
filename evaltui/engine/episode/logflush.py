"""An episode's log.jsonl writes: whole steps, batched to one write per interval.

A write system call a step would cost 10-40 µs on the development VM's ext4 (more while
the run process creates its episode files), about a tenth of a short GoToLocal episode
(~3 ms, 6 steps). So a step's end writes at once only if the log's last write is older
than ``interval`` (:data:`FLUSH_INTERVAL_SEC`);
otherwise the step waits, with whole steps after it, for the first step end past the
interval, the log's close, or this process's flusher thread, which writes waiting steps
at most about ``interval`` after their end even while a node blocks for long.

So a reader (the live viewer, the hung-step watch) still sees only whole steps, each
within ~``interval`` of its end, and the log is complete when the logger's ``close``
returns. A worker killed loses the steps still waiting as well as the step in progress;
a frame already in frames.bin is then referenced by no line, as for the step in progress.
``before_write`` (the episode's frames.bin writer's ``flush``) runs before every write of
lines, so a frame is on disk before any line that refers to it.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from functools import partial

from evaltui.rundir.diskfull import DISK

FLUSH_INTERVAL_SEC = 0.05


class StepWriter:
    """Appends whole steps of records to a file descriptor it owns (see the module doc).

    ``append`` and ``end_step`` are called from one thread (the episode's loop); the
    flusher thread only writes steps already ended.
    """

    def __init__(self, fd: int, interval: float = FLUSH_INTERVAL_SEC,
                 before_write: Callable[[], None] | None = None) -> None:
        self.interval = interval
        self._before_write = before_write
        self.closed = False
        self._fd = fd
        self._step: list[bytes] = []
        self._waiting: list[bytes] = []
        self._written_at = float("-inf")
        self._error: OSError | None = None
        self._lock = threading.Lock()

    def append(self, line: bytes) -> None:
        """A record of the step in progress (written no earlier than the step's end)."""
        self._step.append(line)

    def end_step(self) -> None:
        """The records so far form whole steps: write them now, or within the interval."""
        with self._lock:
            self._raise_error()
            self._waiting += self._step
            self._step.clear()
            if not self._waiting:
                return
            if time.monotonic() - self._written_at >= self.interval:
                self._write()
                return
        _FLUSHER.watch(self)

    def close(self) -> None:
        """Write every record appended (a step cut short too) and close the file."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            try:
                self._raise_error()
                self._waiting += self._step
                self._step.clear()
                if self._waiting:
                    self._write()
            finally:
                os.close(self._fd)

    def write_waiting(self) -> None:
        """The flusher's tick: write the steps waiting, if any."""
        with self._lock:
            if self.closed or not self._waiting or self._error is not None:
                return
            try:
                self._write()
            except OSError as exc:  # the episode's thread raises it at its next step end
                self._error = exc

    def _write(self) -> None:
        if self._before_write is not None:
            self._before_write()
        view = memoryview(b"".join(self._waiting))
        self._waiting.clear()
        while view:
            # A full disk: the episode waits for room where it is (DESIGN §12).
            view = view[DISK.retry("log.jsonl", partial(os.write, self._fd, view)):]
        self._written_at = time.monotonic()

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error


class _Flusher:
    """One daemon thread per process that writes the waiting steps of open StepWriters.

    It ticks every (smallest) interval while writers are watched and sleeps otherwise; a
    writer closed is dropped at the next tick, so back-to-back episodes do not wake it
    from its sleep each time.
    """

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a fork has no flusher thread

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._writers: set[StepWriter] = set()
        self._thread: threading.Thread | None = None
        self._period = math.inf  # the tick the thread sleeps; inf: no writers, idle

    def watch(self, writer: StepWriter) -> None:
        with self._cond:
            self._writers.add(writer)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="log-flusher",
                                                daemon=True)
                self._thread.start()
            if writer.interval < self._period:  # idle, or ticking too slowly for it
                self._period = writer.interval
                self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                if not self._writers:
                    self._period = math.inf
                    self._cond.wait()
                    continue
                self._period = min(w.interval for w in self._writers)
                self._cond.wait(self._period)
                self._writers = {w for w in self._writers if not w.closed}
                writers = list(self._writers)
                self._cond.release()
                try:
                    for writer in writers:
                        writer.write_waiting()
                finally:
                    self._cond.acquire()


_FLUSHER = _Flusher()
