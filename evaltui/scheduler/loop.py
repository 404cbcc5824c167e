"""SchedulerLoop: the scheduler's one long-lived thread.

It ticks every ``interval`` seconds, at once when nudged (a submit, an unlock, a finished
load) and at once when a run exits: it waits on the runs' pidfds as well as on a wake
pipe, so a finished run frees its memory for the next job without waiting for the next
second. Between ticks it runs ``idle`` (episode events, deferred record writes).
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Callable
from contextlib import suppress

log = logging.getLogger(__name__)


class SchedulerLoop:
    """Owns the thread: ``start``/``stop`` bound it, ``nudge`` wakes it."""

    def __init__(self, tick: Callable[[], None], idle: Callable[[], None],
                 pidfds: Callable[[], set[int]], interval: float) -> None:
        self._tick = tick
        self._idle = idle
        self._pidfds = pidfds
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wake: tuple[int, int] | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        self._wake = (r, w)
        self._thread = threading.Thread(target=self._run, name="evaltui-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        thread = self._thread
        if thread is None:
            return
        self._stop.set()
        self.nudge()
        thread.join(timeout)
        self._thread = None
        if self._wake is not None:
            for fd in self._wake:
                os.close(fd)
            self._wake = None

    def nudge(self) -> None:
        wake = self._wake
        if wake is not None:
            with suppress(OSError):  # a full pipe already means "wake up"; a closed one, "stopping"
                os.write(wake[1], b"\0")

    def _run(self) -> None:
        assert self._wake is not None
        wake_r = self._wake[0]
        fired: set[int] = set()  # pidfds that reported an exit: not polled again
        next_tick = 0.0
        while not self._stop.is_set():
            poller = select.poll()
            poller.register(wake_r, select.POLLIN)
            for fd in self._pidfds() - fired:
                poller.register(fd, select.POLLIN)
            timeout_ms = max(0, int((next_tick - time.monotonic()) * 1000))
            for fd, _ in poller.poll(timeout_ms):
                if fd == wake_r:
                    _drain(wake_r)
                else:
                    fired.add(fd)
            if self._stop.is_set():
                break
            for step in (self._tick, self._idle):
                try:
                    step()
                except Exception:  # the loop must outlive any one bad tick
                    log.exception("scheduler loop: %s failed", getattr(step, "__name__", step))
            fired &= self._pidfds()
            next_tick = time.monotonic() + self.interval


def _drain(fd: int) -> None:
    with suppress(BlockingIOError):
        while os.read(fd, 4096):
            pass
