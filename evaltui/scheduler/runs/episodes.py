"""Finished-episode events from run dirs, by cheap polling.

Each watched run costs one ``stat`` of its ``episodes/`` dir per scan, plus one per
episode that is in flight or not ``ok`` yet: an ``ok`` episode is never looked at again
(a resume skips it), so a 5,000-episode run is not re-listed every second. A new
``ep{NNNN}/`` dir changes the dir's mtime and is picked up by one ``scandir``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from evaltui.contract.records import EPISODE_FILENAME, EPISODES_DIRNAME
from evaltui.contract.states import EpisodeStatus
from evaltui.rundir.layout import episode_index_from_dirname
from evaltui.rundir.safeopen import object_inside_or_none
from evaltui.scheduler.events import EpisodeFinished


@dataclass
class _Watched:
    episodes: Path
    dir_mtime: int = -1
    open: dict[int, int] = field(default_factory=dict)
    """Episode index -> mtime_ns of its episode.json when last seen (-1: none yet)."""
    settled: set[int] = field(default_factory=set)


class EpisodeWatcher:
    """Reports each episode.json written while a run is watched."""

    def __init__(self) -> None:
        self._runs: dict[str, _Watched] = {}

    def watch(self, run_id: str, run_dir: Path) -> None:
        """Start watching; episodes already finished at this moment are not reported."""
        if run_id in self._runs:
            return
        w = _Watched(Path(run_dir) / EPISODES_DIRNAME)
        self._runs[run_id] = w
        self._rescan(w, initial=True)

    def unwatch(self, run_id: str) -> list[EpisodeFinished]:
        """A last scan (episodes finished just before the exit), then forget the run."""
        events = self._scan_one(run_id, self._runs[run_id]) if run_id in self._runs else []
        self._runs.pop(run_id, None)
        return events

    def scan(self) -> list[EpisodeFinished]:
        """Episodes finished since the previous scan, over every watched run."""
        events: list[EpisodeFinished] = []
        for run_id, w in list(self._runs.items()):
            events.extend(self._scan_one(run_id, w))
        return events

    def _scan_one(self, run_id: str, w: _Watched) -> list[EpisodeFinished]:
        self._rescan(w, initial=False)
        events = []
        for index, seen in sorted(w.open.items()):
            path = w.episodes / f"ep{index:04d}" / EPISODE_FILENAME
            try:
                mtime = path.stat().st_mtime_ns
            except OSError:
                continue
            if mtime == seen:
                continue
            status = _status(path)
            if status is None:
                continue  # replaced between stat and read: next scan
            w.open[index] = mtime
            events.append(EpisodeFinished(run_id, index, status, time.time()))
            if status == EpisodeStatus.OK:
                del w.open[index]
                w.settled.add(index)
        return events

    def _rescan(self, w: _Watched, initial: bool) -> None:
        try:
            mtime = w.episodes.stat().st_mtime_ns
        except OSError:
            return
        if mtime == w.dir_mtime:
            return
        w.dir_mtime = mtime
        for entry in os.scandir(w.episodes):
            index = episode_index_from_dirname(entry.name)
            if index is None or index in w.open or index in w.settled:
                continue
            path = Path(entry.path) / EPISODE_FILENAME
            if not initial:
                w.open[index] = -1
                continue
            try:
                seen = path.stat().st_mtime_ns
            except OSError:
                w.open[index] = -1
                continue
            if _status(path) == EpisodeStatus.OK:
                w.settled.add(index)
            else:
                w.open[index] = seen


def _status(path: Path) -> str | None:
    # never through a symlink out of the run dir (DESIGN §11): it would reach /events
    status = (object_inside_or_none(path.parents[2], path.absolute()) or {}).get("status")
    return str(status) if status is not None else None
