"""Recorder: the pool's disk work, on its own thread, so dealing never waits for the disk.

Recording a finished episode (the run's ``on_result``: its episode.json and trajectory
files, the summary row) costs the run ~0.5 ms a result on a quiet disk and, when the
journal is busy, up to ~80 ms measured on the shared VM; while the dealing thread did
it, every worker that finished meanwhile sat idle. Here results are recorded in the
order they came, on one thread; the dealing thread only hands them over.

The recorder also makes the episode dirs of the episodes about to be dealt (a mkdir is
~0.3-1 ms here, on the worker's critical path otherwise; the worker's own
``mkdir(exist_ok=True)`` then finds the dir there). An empty ep dir means nothing to
the run dir's readers, which look for episode.json.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

_STOP = object()


class Recorder:
    """Calls ``on_result`` for each result put, in order, on one thread."""

    def __init__(self, on_result: Callable[[Any], None]) -> None:
        self.on_result = on_result
        self.error: BaseException | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._made: set[Path] = set()
        self._thread = threading.Thread(target=self._loop, name="pool-recorder", daemon=True)
        self._thread.start()

    def put(self, result: Any) -> None:
        self._queue.put(("result", result))

    def make_dirs(self, dirs: Iterable[Path]) -> None:
        """Create these dirs ahead of use (each at most once)."""
        new = [d for d in dirs if d not in self._made]
        if new:
            self._made.update(new)
            self._queue.put(("dirs", new))

    def check(self) -> None:
        """Re-raise, on the caller's thread, what ``on_result`` raised."""
        if self.error is not None:
            raise self.error

    def close(self, check: bool = True) -> None:
        """Wait until everything put so far is recorded; then (with ``check``) ``check``."""
        self._queue.put(_STOP)
        self._thread.join()
        if check:
            self.check()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            kind, value = item
            if kind == "dirs":
                for path in value:
                    try:
                        path.mkdir(parents=True, exist_ok=True)
                    except OSError:
                        pass  # the worker's own mkdir reports it
                continue
            if self.error is not None:
                continue  # the run is failing; the pool raises it
            try:
                self.on_result(value)
            except BaseException as exc:
                self.error = exc
