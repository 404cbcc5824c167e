"""EmbeddedBackend: the TUI's Backend over a JobScheduler running in this process.

It turns the scheduler's status views (runs, queue, resources, lock) into the TUI's
display rows (:func:`~evaltui.tui.backend.queue_rows`, as the attached backend does) and
the scheduler's exceptions into messages for the user. The scheduler calls listeners on
its own thread; ``subscribe`` passes them through so the queue screen can poll at once
when a run changes state instead of waiting for its timer.
"""

from __future__ import annotations

import getpass
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaltui.contract.states import RunState
from evaltui.scheduler.admits.entry import ADMIT_PREFIX
from evaltui.scheduler.admits.queue import AdmitNotFound
from evaltui.scheduler.core import NotResumable, RunNotFound
from evaltui.scheduler.lock import LockHeldError
from evaltui.scheduler.scheduler import JobScheduler
from evaltui.tui.backend import (
    BackendError,
    QueueSnapshot,
    queue_rows,
    scheduler_info,
)


class EmbeddedBackend:
    """A Backend over an in-process JobScheduler; ``start``/``stop`` own its loop thread."""

    label = "embedded"

    def __init__(self, scheduler: JobScheduler, *, api_note: str | None = None,
                 owner: str | None = None) -> None:
        self.scheduler = scheduler
        self.api_note = api_note
        self.owner = owner or f"evaltui TUI ({getpass.getuser()}, pid {os.getpid()})"
        self._started = False
        self._warnings: dict[str, list[str]] = {}
        """What submit warned about, per run, until the submit form asks."""

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
        info = scheduler_info(resources, self.label, self.api_note, time.time(),
                              "running" if self._started else "paused")
        return QueueSnapshot(info, resources,
                             tuple(queue_rows(runs, queue, self.scheduler.admits.all())))

    def run_dir(self, run_id: str) -> Path | None:
        try:
            return self.scheduler.get_run(run_id).run_dir
        except RunNotFound:
            return None

    # --- actions -------------------------------------------------------------------------

    def submit(self, spec: dict[str, Any]) -> tuple[str, RunState]:
        submitted = self.scheduler.submit(spec)
        self._warnings[submitted.run_id] = list(submitted.warnings)  # as the attached one
        return submitted.run_id, submitted.state

    def submit_warnings(self, run_id: str) -> list[str]:
        return self._warnings.pop(run_id, [])

    def cancel(self, run_id: str) -> RunState:
        if run_id.startswith(ADMIT_PREFIX):  # a served policy: released, it stops itself
            try:
                self.scheduler.admits.release(run_id.removeprefix(ADMIT_PREFIX),
                                              "cancelled in the TUI")
            except AdmitNotFound:
                raise BackendError(f"no admit entry {run_id}") from None
            return RunState.CANCELLED
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
