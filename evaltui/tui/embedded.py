"""EmbeddedBackend: the TUI's Backend over a JobScheduler running in this process.

It maps the scheduler's views (runs, queue, resources, lock) onto the TUI's display
records and turns the scheduler's exceptions into messages for the user. The scheduler
calls listeners on its own thread; ``subscribe`` passes them through so the queue
screen can poll at once when a run changes state instead of waiting for its timer.
"""

from __future__ import annotations

import getpass
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaltui.rundir import read_json
from evaltui.scheduler import (
    JobScheduler,
    LockHeldError,
    NotResumable,
    QueuedJob,
    ResourcesInfo,
    RunNotFound,
)
from evaltui.scheduler import RunInfo as SchedRun
from evaltui.states import RunState
from evaltui.tui.backend import (
    BackendError,
    QueueSnapshot,
    RunInfo,
    SchedulerInfo,
    SchedulerMode,
    megabytes,
    resources_view,
)

ACTIVE = (RunState.STARTING, RunState.RUNNING)


class EmbeddedBackend:
    """A Backend over an in-process JobScheduler; ``start``/``stop`` own its loop thread."""

    label = "embedded"

    def __init__(self, scheduler: JobScheduler, *, api_note: str | None = None,
                 owner: str | None = None) -> None:
        self.scheduler = scheduler
        self.api_note = api_note
        self.owner = owner or f"evaltui TUI ({getpass.getuser()}, pid {os.getpid()})"
        self._started = False
        self._specs: dict[str, dict[str, Any]] = {}
        self._specs_lock = threading.Lock()

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self.scheduler.start()
        self._started = True

    def stop(self) -> None:
        if self._started:
            self.scheduler.stop()
            self._started = False

    def subscribe(self, callback: Callable[[], None]) -> None:
        self.scheduler.add_listener(lambda _event: callback())

    # --- reads ---------------------------------------------------------------------------

    def snapshot(self) -> QueueSnapshot:
        resources = self.scheduler.resources()
        queue = self.scheduler.queue()
        runs = self.scheduler.list_runs()
        return QueueSnapshot(self._scheduler_info(resources), resources_view(resources),
                             tuple(self._ordered(runs, queue)))

    def run_dir(self, run_id: str) -> Path | None:
        try:
            return self.scheduler.get_run(run_id).run_dir
        except RunNotFound:
            return None

    def _scheduler_info(self, res: ResourcesInfo) -> SchedulerInfo:
        lock = res.lock
        left = lock.expires_at - time.time() if lock is not None else None
        mode: SchedulerMode
        if lock is not None and left is not None and left > 0:
            mode = "locked"
        else:
            mode = "running" if self._started else "paused"
        return SchedulerInfo(mode=mode, label=self.label,
                             lock_owner=lock.owner if mode == "locked" and lock else None,
                             lock_expires_in_sec=left if mode == "locked" else None,
                             api_note=self.api_note)

    def _ordered(self, runs: list[SchedRun], queue: list[QueuedJob]) -> list[RunInfo]:
        """Active runs, then the queue in admission order, then finished runs (newest first)."""
        by_id = {r.run_id: r for r in runs}
        queued = {q.run_id: q for q in queue}
        active = [self._info(r, None) for r in runs if r.state in ACTIVE]
        waiting = [self._info(by_id[q.run_id], q) for q in queue if q.run_id in by_id]
        rest = [self._info(r, None) for r in runs
                if r.state not in ACTIVE and r.run_id not in queued]
        return active + waiting + rest

    def _info(self, run: SchedRun, queued: QueuedJob | None) -> RunInfo:
        summary = run.summary or {}
        record = run.scheduler or {}
        spec = self._spec(run) if not summary.get("dataset") else {}
        ev = spec.get("eval") or {}
        graph = summary.get("graph_name") or ev.get("graph_name") or \
            (queued.graph_name if queued else None) or (spec.get("graph") or {}).get("name")
        total = summary.get("episodes_total")
        if not isinstance(total, int):
            total = _spec_total(ev)
        error = run.error
        failure = summary.get("error") or record.get("error")
        estimate = record.get("estimate_mb")
        if queued is not None and queued.estimate_source != "unknown":
            estimate = queued.estimate_mb  # fresher: recomputed as calibration learns
        return RunInfo(
            run_id=run.run_id, state=run.state, run_dir=run.run_dir,
            graph=str(graph or "?"),
            dataset=str(summary.get("dataset") or ev.get("dataset") or "?"),
            split=str(summary.get("split") or ev.get("split") or "-"),
            episodes_total=total,
            episodes_finished=int(summary.get("episodes_finished") or 0),
            metrics={k: float(v) for k, v in (summary.get("metrics") or {}).items()
                     if isinstance(v, int | float)},
            worker_count=int(summary.get("worker_count") or ev.get("worker_count") or 1),
            priority=queued.priority if queued else int(record.get("priority") or 0),
            queued_at=queued.queued_at if queued else record.get("queued_at"),
            vram_estimate_mb=megabytes(estimate),
            vram_measured_mb=megabytes(record.get("measured_peak_mb")),
            waiting_reason=queued.waiting_reason if queued else run.waiting_reason,
            error=error or (str(failure) if failure else None),
            file_error=error is not None,
        )

    def _spec(self, run: SchedRun) -> dict[str, Any]:
        """The run's spec.json (never changes after submit, so it is read once)."""
        with self._specs_lock:
            cached = self._specs.get(run.run_id)
        if cached is not None:
            return cached
        try:
            spec = read_json(run.run_dir / "spec.json")
        except (OSError, ValueError):
            return {}  # a corrupt spec shows as "?" fields; the run's own error says more
        spec = spec if isinstance(spec, dict) else {}
        with self._specs_lock:
            self._specs[run.run_id] = spec
        return spec

    # --- actions -------------------------------------------------------------------------

    def submit(self, spec: dict[str, Any]) -> tuple[str, RunState]:
        return self.scheduler.submit(spec)

    def cancel(self, run_id: str) -> RunState:
        try:
            return self.scheduler.cancel(run_id)
        except RunNotFound:
            raise BackendError(f"no run {run_id}") from None

    def resume(self, run_id: str) -> RunState:
        try:
            return self.scheduler.resume(run_id)
        except RunNotFound:
            raise BackendError(f"no run {run_id}") from None
        except NotResumable as exc:
            raise BackendError(str(exc)) from None

    def set_priority(self, run_id: str, priority: int) -> None:
        try:
            self.scheduler.set_priority(run_id, priority)
        except RunNotFound:
            raise BackendError(f"no run {run_id}") from None
        except ValueError as exc:  # NotQueued (it started), or out of range
            raise BackendError(str(exc)) from None

    def lock(self, ttl_sec: float) -> None:
        try:
            self.scheduler.lock(self.owner, ttl_sec)
        except LockHeldError as exc:
            raise BackendError(str(exc)) from None

    def unlock(self) -> None:
        if not self.scheduler.unlock(self.owner):
            raise BackendError("the interactive lock is held by someone else")


def _spec_total(ev: dict[str, Any]) -> int:
    indices = ev.get("episode_indices")
    if isinstance(indices, list):
        return len(indices)
    count = ev.get("episode_count")
    return count if isinstance(count, int) else 0

