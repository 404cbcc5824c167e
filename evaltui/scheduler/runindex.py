"""Status reads of run dirs from disk, cached while a finished run's files do not change.

``list_runs`` over hundreds of old runs would otherwise parse every summary.json (which
carries every episode row) on each call. A terminal state cannot change without one of
scheduler.json, summary.json or ``_DONE`` changing, so the cache key is their stat.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from evaltui.results.rebuild import rebuild_summary
from evaltui.rundir import (
    DONE_FILENAME,
    SCHEDULER_FILENAME,
    SUMMARY_FILENAME,
    is_run_id,
    read_run_status,
)
from evaltui.scheduler.views import RunInfo

_Key = tuple[int, int, bool]


def strip_rows(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """A summary without its per-episode rows (they are read per episode)."""
    if summary is None:
        return None
    return {k: v for k, v in summary.items() if k != "episodes"}


class RunIndex:
    """Reads run dirs under one ``eval_runs/`` root."""

    def __init__(self, runs_root: Path) -> None:
        self.runs_root = runs_root
        self._cache: dict[str, tuple[_Key, RunInfo]] = {}
        self._lock = threading.Lock()

    def run_ids(self) -> list[str]:
        """Every run id under the root, newest first."""
        try:
            names = [e.name for e in os.scandir(self.runs_root) if e.is_dir()]
        except FileNotFoundError:
            return []
        return sorted((n for n in names if is_run_id(n)), key=_order, reverse=True)

    def read(self, run_id: str) -> RunInfo | None:
        """The run's info from disk, or None if there is no such run dir."""
        run_dir = self.runs_root / run_id
        key = _stat_key(run_dir)
        if key is None:
            return None
        with self._lock:
            hit = self._cache.get(run_id)
        if hit is not None and hit[0] == key:
            return hit[1]
        status = read_run_status(run_dir)
        sched = status.scheduler or {}
        summary = status.summary
        if status.summary_unreadable:  # rows and metrics from the episode.json files
            summary = rebuild_summary(run_dir, status.state, status.error)
        info = RunInfo(run_id=run_id, run_dir=run_dir, state=status.state,
                       scheduler=status.scheduler, summary=strip_rows(summary),
                       waiting_reason=sched.get("waiting_reason"),
                       error=status.error or status.note)
        if status.state.terminal:
            with self._lock:
                self._cache[run_id] = (key, info)
        return info


def _order(run_id: str) -> tuple[str, int]:
    """Sort key: the timestamp, then the collision suffix (``_2`` after the plain one)."""
    suffix = run_id[16:]
    return (run_id[:15], int(suffix) if suffix.isdigit() else 1)


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
