"""``GET /runs`` without re-reading every run dir per request.

The list keeps each run's JSON entry keyed by what its state depends on: the stat of
scheduler.json and summary.json, whether ``_DONE`` exists, and, for a run that is
starting or running, whether its process still lives (a SIGKILLed run turns ``aborted``
without touching a file). A request costs one ``scandir`` (only when the runs root
changed), three ``stat`` per run and a /proc read per live run; entries are rebuilt from
the scheduler only for runs whose files changed. Queued runs of this scheduler get their
live ``waiting_reason`` from its queue. Always exactly as fresh as a full rescan.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from evaltui.api.runfiles import run_refusal
from evaltui.contract.records import DONE_FILENAME, SCHEDULER_FILENAME, SUMMARY_FILENAME
from evaltui.contract.states import RunState
from evaltui.rundir.layout import is_run_id, run_id_order
from evaltui.rundir.safeopen import Root
from evaltui.scheduler import procs
from evaltui.scheduler.core import RunNotFound
from evaltui.scheduler.scheduler import JobScheduler

_Key = tuple[int, int, bool]
_LIVE = (RunState.STARTING.value, RunState.RUNNING.value)


class RunList:
    """Every run under a scheduler's runs root as API entries, newest first."""

    def __init__(self, scheduler: JobScheduler) -> None:
        self.scheduler = scheduler
        self.root = str(scheduler.runs_root)
        self._safe_root = Root.of(self.root)
        self._lock = threading.Lock()
        self._ids: tuple[int, float, list[str]] = (-1, 0.0, [])
        self._entries: dict[str, tuple[_Key, dict[str, Any]]] = {}

    def runs(self, state: RunState | None = None) -> list[dict[str, Any]]:
        """Entries (``models.Run`` fields), newest first, optionally of one state."""
        queued = {q.run_id: q.waiting_reason for q in self.scheduler.queue()}
        out = []
        ids = self._run_ids()
        with self._lock:
            cached = {run_id: self._entries.get(run_id) for run_id in ids}
        fresh: dict[str, tuple[_Key, dict[str, Any]]] = {}
        for run_id in ids:
            key = _stat_key(f"{self.root}/{run_id}/")
            if key is None:
                continue  # deleted while listing
            hit = cached[run_id]
            entry = hit[1] if hit is not None and hit[0] == key and _still(hit[1]) else None
            if entry is None:
                if run_refusal(self._safe_root, run_id) is not None:
                    continue  # a symlink out of the outputs root: not served (runfiles.py)
                try:
                    entry = self.scheduler.get_run(run_id).model_dump(mode="json")
                except RunNotFound:
                    continue
            fresh[run_id] = (key, entry)
            if run_id in queued and entry["state"] == RunState.QUEUED.value:
                entry = {**entry, "waiting_reason": queued[run_id]}
            if state is None or entry["state"] == state.value:
                out.append(entry)
        with self._lock:
            self._entries = fresh  # runs deleted from disk drop out here
        return out

    def _run_ids(self) -> list[str]:
        """Run dir names, newest first; re-listed when the root's mtime moves (and at least
        once a second, for file systems whose timestamps are coarser than a mkdir)."""
        try:
            mtime = os.stat(self.root).st_mtime_ns
        except FileNotFoundError:
            return []
        now = time.monotonic()
        with self._lock:
            seen, listed_at, names = self._ids
            if seen == mtime and now - listed_at < 1.0:
                return names
        with os.scandir(self.root) as entries:
            names = [e.name for e in entries if is_run_id(e.name) and e.is_dir()]
        names.sort(key=run_id_order, reverse=True)
        with self._lock:
            self._ids = (mtime, now, names)
        return names


def _stat_key(prefix: str) -> _Key | None:
    """What a run's state depends on, from ``prefix`` = ``"{run_dir}/"`` (plain string
    concatenation: this runs 2,000 times a request and os.path.join costs as much as
    the stat)."""
    try:
        sched = os.stat(prefix + SCHEDULER_FILENAME).st_mtime_ns
    except FileNotFoundError:
        if not os.path.isdir(prefix):
            return None
        sched = -1
    try:
        summary = os.stat(prefix + SUMMARY_FILENAME).st_mtime_ns
    except FileNotFoundError:
        summary = -1
    return (sched, summary, os.path.exists(prefix + DONE_FILENAME))


def _still(entry: dict[str, Any]) -> bool:
    """False when a starting or running run's process is gone (its state changed)."""
    if entry["state"] not in _LIVE:
        return True
    record = entry.get("scheduler") or {}
    pid, ctime = record.get("pid"), record.get("pid_create_time")
    return isinstance(pid, int) and isinstance(ctime, int | float) and procs.alive(pid, ctime)
