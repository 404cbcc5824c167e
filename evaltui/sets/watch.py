"""``set watch``: queue checkpoints as training writes them, each once, in step order.

:class:`CheckpointScanner` decides when a file is complete: its sidecar
``NAME.done`` exists, or its size and mtime have not changed for ``settle_sec``
(training scripts that write in place). :func:`watch_set` wakes up on the directory's
changes (watchfiles; a timeout too, so a settling file is seen without another event),
adds the members of newly complete checkpoints to the runner -- a member is known by its
key, so a checkpoint already in set.json (an earlier watch) is never evaluated twice --
and steps the runner. It ends when ``until`` checkpoints are in the set, when a stop
file appears (``STOP`` in the set dir or in the watched dir), or on Ctrl-C; then it
follows the members already queued to their end (not after Ctrl-C).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import watchfiles

from evaltui.contract.setspec import STOP_FILENAME
from evaltui.rundir.pollfiles import POLL_DELAY_MS, should_poll
from evaltui.sets.expansion import Member, checkpoint_step, inside
from evaltui.sets.runner import SetRunner

DONE_SUFFIX = ".done"


@dataclass
class CheckpointScanner:
    """Complete checkpoint files under ``directory`` matching ``glob``."""

    directory: Path
    glob: str
    settle_sec: float = 2.0
    clock: Callable[[], float] = time.monotonic
    _seen: dict[Path, tuple[int, int, float]] = field(default_factory=dict)
    """File -> (size, mtime_ns, when that pair was first seen)."""

    def complete(self) -> list[Path]:
        """Every complete matching file now, in step order (files without a step in
        their name are left out: they have no place on the curve)."""
        now = self.clock()
        ready = []
        for path in self.directory.glob(self.glob) if self.directory.is_dir() else ():
            if path.name.endswith(DONE_SUFFIX) or not path.is_file() \
                    or not inside(self.directory, path):
                continue
            if checkpoint_step(path) is None:
                continue
            if path.with_name(path.name + DONE_SUFFIX).exists():
                ready.append(path)
                continue
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            size_time = (st.st_size, st.st_mtime_ns)
            old = self._seen.get(path)
            if old is None or old[:2] != size_time:
                self._seen[path] = (*size_time, now)
                continue
            if st.st_size > 0 and now - old[2] >= self.settle_sec:
                ready.append(path)
        return sorted(ready, key=lambda p: (checkpoint_step(p), p.name))


def watch_set(runner: SetRunner, scanner: CheckpointScanner,
              members_for: Callable[[list[Path]], list[Member]], *, set_dir: Path,
              until: int | None = None, tick_sec: float = 0.5,
              stop: threading.Event | None = None) -> None:
    """Watch until ``until`` checkpoints are in the set, a stop file, ``stop`` or Ctrl-C;
    then follow the queued members to their end (``runner.run``)."""
    stop = stop or threading.Event()
    stop_files = (set_dir / STOP_FILENAME, scanner.directory / STOP_FILENAME)

    def done_watching() -> bool:
        if until is not None and _checkpoints(runner) >= until:
            return True
        return stop.is_set() or any(p.exists() for p in stop_files)

    scanner.directory.mkdir(parents=True, exist_ok=True)
    _add(runner, scanner, members_for, until)
    runner.step()
    if not done_watching():
        # polling where inotify cannot see other nodes' writes (a network filesystem)
        for _changes in watchfiles.watch(scanner.directory, stop_event=stop,
                                         yield_on_timeout=True, debounce=100,
                                         rust_timeout=int(tick_sec * 1000),
                                         force_polling=should_poll(scanner.directory),
                                         poll_delay_ms=POLL_DELAY_MS):
            _add(runner, scanner, members_for, until)
            runner.step()
            if done_watching():
                break
    runner.run()


def _add(runner: SetRunner, scanner: CheckpointScanner,
         members_for: Callable[[list[Path]], list[Member]], until: int | None) -> None:
    files = scanner.complete()
    if until is not None:
        files = files[:until]  # the first N steps: --until N evaluates N checkpoints
    if files:
        runner.add_members(members_for(files))


def _checkpoints(runner: SetRunner) -> int:
    """Distinct checkpoints among the set's members."""
    assert runner.record is not None
    return len({m.axes.get("checkpoint") for m in runner.record.members
                if m.axes.get("checkpoint") is not None})
