"""Recorder: an executor's disk work, on its own thread, so dealing never waits for it.

Recording a finished episode (the run's ``on_result``: its episode.json and trajectory
files, the summary row) costs the run ~0.5 ms a result on a quiet disk and, when the
journal is busy, up to ~80 ms measured on the shared VM; were the dealing thread to do
it, every worker that finished meanwhile would sit idle. Here results are recorded in the
order they came, on one thread; the dealing thread only hands them over.

The recorder also makes the episode dirs of the episodes about to be dealt, each with an
empty ``log.jsonl``: creating a dir or a file is ~0.15-1 ms on the development VM's
ext4, on the worker's critical path otherwise (a GoToLocal episode's own work is ~3 ms);
the worker's logger then only opens the file, truncating it (~0.02 ms). The file is
made with ``O_EXCL``, so a slow recorder never truncates a log a worker has begun. An
ep dir with an empty log means nothing more to the run dir's readers than an empty ep
dir: they look for episode.json, and the hung-episode watch reads an empty log as
an env still resetting. Once an episode of the run has written a ``frames.bin``, the next
episodes get an empty one too (the frame writer opens it the same way); a run without
tiled frames never gets one. Dirs are made before any result still queued is recorded: a
worker may be about to need one, while a result waits for nobody (on a busy disk the
results can fall behind by tens of episodes).
"""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any

from evaltui.contract.records import LOG_FILENAME
from evaltui.rundir.framefile import FRAMES_FILENAME, FRAMES_MODE

_STOP, _DIRS = object(), object()


class Recorder:
    """Calls ``on_result`` for each result put, in order, on one thread."""

    def __init__(self, on_result: Callable[[Any], None]) -> None:
        self.on_result = on_result
        self.error: BaseException | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._made: set[Path] = set()
        self._dirs: deque[Path] = deque()
        self._recent: deque[Path] = deque(maxlen=8)  # the dirs made last
        self._files = {LOG_FILENAME: 0o666}  # made empty in each dir: name -> mode
        self._thread = threading.Thread(target=self._loop, name="pool-recorder", daemon=True)
        self._thread.start()

    def put(self, result: Any) -> None:
        self._queue.put(result)

    def make_dirs(self, dirs: Iterable[Path]) -> None:
        """Create these episode dirs, each with an empty log.jsonl, ahead of use (each at
        most once)."""
        new = [d for d in dirs if d not in self._made]
        if new:
            self._made.update(new)
            self._dirs.extend(new)
            self._queue.put(_DIRS)

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
            while self._dirs:  # ahead of every queued result
                self._make_episode_dir(self._dirs.popleft())
            if item is _STOP:
                return
            if item is _DIRS:
                continue
            if self.error is not None:
                continue  # the run is failing; the executor raises it
            try:
                self.on_result(item)
            except BaseException as exc:
                self.error = exc

    def _make_episode_dir(self, path: Path) -> None:
        if FRAMES_FILENAME not in self._files and any(
                (d / FRAMES_FILENAME).exists() for d in self._recent):
            self._files[FRAMES_FILENAME] = FRAMES_MODE  # this run's episodes write frames
        self._recent.append(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            return  # the worker's own mkdir reports it
        for name, mode in self._files.items():
            with suppress(OSError):  # there already: a file begun, or an earlier attempt's
                os.close(os.open(path / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
