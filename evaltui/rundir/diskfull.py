"""A full disk is a condition, not a crash (DESIGN §12): wait for room, up to a deadline.

A write that fails with ENOSPC or EDQUOT is tried again with back-off (0.05 s doubling
to 1 s) until it succeeds or, past ``EVALTUI_DISK_FULL_WAIT_SEC`` (default 300 s) of
failing, it raises :class:`DiskFull` naming the path. One :data:`DISK` per process is
shared by its writers: a run process's recorder and summary writer, a worker's episode
log. While any of them waits, :meth:`DiskWait.waiting` says for which path and since
when: the pool deals no episode then, and the summary, once it can be written, says how
long the run waited. Any other OSError is raised at once, as before.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from evaltui.contract.settings import settings  # pydantic: only once a disk is full

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
DEFAULT_WAIT_SEC = 300.0
BACKOFF_FIRST_SEC, BACKOFF_MAX_SEC = 0.05, 1.0

T = TypeVar("T")


class DiskFull(OSError):
    """A write still found no room past the deadline; ``str()`` is ``disk full: PATH``."""

    def __init__(self, path: str, waited_sec: float) -> None:
        super().__init__(errno.ENOSPC, f"disk full: {path}")
        self.path = path
        self.waited_sec = waited_sec

    def __str__(self) -> str:
        return f"disk full: {self.path}"


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that failed for lack of space (or of quota)."""
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


@dataclass(frozen=True)
class Waiting:
    """A write waiting for room: its path, and since when (``time.time()``)."""

    path: str
    since: float


class DiskWait:
    """Retries writes while their disk is full; thread-safe, shared by a process's writers."""

    def __init__(self, deadline_sec: float | None = None) -> None:
        self._deadline = deadline_sec
        self._lock = threading.Lock()
        self._waiting: dict[int, Waiting] = {}  # by the id of the waiting call
        self.waited_sec = 0.0
        """Seconds writes of this process spent waiting for room, all told."""
        self.last_path: str | None = None
        """The path of the last write that had to wait (None if none ever did)."""
        self.gave_up: DiskFull | None = None
        """Set once a write waited past the deadline: later ones then fail at once (the run
        is ending; each waiting the deadline again would only delay that)."""

    @property
    def deadline_sec(self) -> float:
        if self._deadline is not None:
            return self._deadline

        value = settings().disk_full_wait_sec
        return DEFAULT_WAIT_SEC if value is None else value

    def waiting(self) -> Waiting | None:
        """The longest-waiting write now, or None while every write goes through."""
        with self._lock:
            return min(self._waiting.values(), key=lambda w: w.since, default=None)

    def retry(self, path: object, write: Callable[[], T]) -> T:
        """``write()``, tried again while it fails for lack of space; DiskFull past the
        deadline (the caller's data is then not written)."""
        try:
            return write()
        except OSError as exc:
            if exc.errno not in FULL_ERRNOS:
                raise
            if self.gave_up is not None:
                raise DiskFull(str(path), 0.0) from exc
        token = object()
        start, backoff = time.monotonic(), BACKOFF_FIRST_SEC
        with self._lock:
            self._waiting[id(token)] = Waiting(str(path), time.time())
            self.last_path = str(path)
        deadline = self.deadline_sec
        try:
            while True:
                left = deadline - (time.monotonic() - start)
                if left <= 0:
                    self.gave_up = DiskFull(str(path), time.monotonic() - start)
                    raise self.gave_up
                time.sleep(min(backoff, left))
                backoff = min(2 * backoff, BACKOFF_MAX_SEC)
                try:
                    return write()
                except OSError as exc:
                    if exc.errno not in FULL_ERRNOS:
                        raise
        finally:
            with self._lock:
                del self._waiting[id(token)]
                self.waited_sec += time.monotonic() - start


DISK = DiskWait()
"""This process's writers' shared wait."""


def _forget_in_child() -> None:
    # A forked worker's waits are its own (and a lock held by a parent's thread would
    # never be released in it): start afresh, in place, for every holder of DISK.
    DISK.__init__(DISK._deadline)  # type: ignore[misc]


os.register_at_fork(after_in_child=_forget_in_child)
