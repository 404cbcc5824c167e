"""Status reads of run dirs from disk, cached while a finished run's files do not change.

``list_runs`` over hundreds of old runs would otherwise parse every summary.json (which
carries every episode row) on each call. A terminal state cannot change without one of
scheduler.json, summary.json or ``_DONE`` changing, so the cache key is their stat.
spec.json never changes once written, so each run's brief of it is read once.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from evaltui.contract.records import (
    DONE_FILENAME,
    SCHEDULER_FILENAME,
    SPEC_FILENAME,
    SUMMARY_FILENAME,
)
from evaltui.contract.states import RunState
from evaltui.contract.views import Run, SpecBrief, run_view
from evaltui.results.rebuild import rebuild_summary
from evaltui.rundir.layout import is_run_id, run_id_order
from evaltui.rundir.runguard import leaving
from evaltui.rundir.safeopen import object_inside_or_none
from evaltui.rundir.status import read_run_status
from evaltui.slurm.follow import follow_status, waiting_reason

_Key = tuple[int, int, bool]


class RunIndex:
    """Reads run dirs under one ``eval_runs/`` root."""

    def __init__(self, runs_root: Path) -> None:
        self.runs_root = runs_root
        self._cache: dict[str, tuple[_Key, Run]] = {}
        self._briefs: dict[str, SpecBrief] = {}
        self._lock = threading.Lock()

    def run_ids(self) -> list[str]:
        """Every run id under the root, newest first."""
        try:
            names = [e.name for e in os.scandir(self.runs_root) if e.is_dir()]
        except FileNotFoundError:
            return []
        return sorted((n for n in names if is_run_id(n)), key=run_id_order, reverse=True)

    def read(self, run_id: str) -> Run | None:
        """The run's view from disk, or None if there is no such run dir."""
        run_dir = self.runs_root / run_id
        key = _stat_key(run_dir)
        if key is None:
            return None
        with self._lock:
            hit = self._cache.get(run_id)
        if hit is not None and hit[0] == key:
            return hit[1]
        if leaving(self.runs_root, run_id) is not None:
            return None  # a symlink out of the outputs root: not read (DESIGN §11)
        read = read_run_status(run_dir)
        status = follow_status(run_dir, read)  # a Slurm run: Slurm's word beside the files
        sched = status.scheduler or {}
        summary = status.summary
        if status.summary_unreadable:  # rows and metrics from the episode.json files
            summary = rebuild_summary(run_dir, status.state, status.error)
        queued = status.state is RunState.QUEUED
        info = run_view(run_id, run_dir, status.state, status.scheduler, summary,
                        self.brief(run_id),
                        waiting_reason=waiting_reason(status, sched.get("waiting_reason")),
                        error=status.error or (None if queued else status.note))
        # Slurm's word may change with no file of the run dir changing: never cached
        if status.state.terminal and status is read:
            with self._lock:
                self._cache[run_id] = (key, info)
        return info

    def brief(self, run_id: str) -> SpecBrief | None:
        """What the run's spec.json asks for, or None while it cannot be read."""
        with self._lock:
            cached = self._briefs.get(run_id)
        if cached is not None:
            return cached
        spec = object_inside_or_none(self.runs_root, f"{run_id}/{SPEC_FILENAME}")
        if spec is None:
            return None
        brief = SpecBrief.of(spec)
        with self._lock:
            self._briefs[run_id] = brief
        return brief


def _stat_key(run_dir: Path) -> _Key | None:
    try:
        sched = (run_dir / SCHEDULER_FILENAME).stat().st_mtime_ns
    except FileNotFoundError:
        if not run_dir.is_dir():
            return None
        sched = -1
    try:
        summary = (run_dir / SUMMARY_FILENAME).stat().st_mtime_ns
    except FileNotFoundError:
        summary = -1
    return (sched, summary, (run_dir / DONE_FILENAME).exists())
