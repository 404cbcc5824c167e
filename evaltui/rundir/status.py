"""A run's state derived from its files (DESIGN §3): scheduler.json, summary.json, ``_DONE``
and a liveness check of its recorded PID.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from evaltui.contract.pidref import PidRef
from evaltui.contract.recordparse import parse_lenient
from evaltui.contract.records import (
    DONE_FILENAME,
    SCHEDULER_FILENAME,
    SUMMARY_FILENAME,
    SchedulerRecord,
    SummaryHeader,
)
from evaltui.contract.states import RunExit, RunState, SummaryStatus
from evaltui.rundir.safeopen import LeavesRoot, NotAnObject, Root, read_object_inside


@dataclass(frozen=True)
class RunStatus:
    """What a status read of one run dir found."""

    state: RunState
    summary: dict[str, Any] | None
    scheduler: dict[str, Any] | None
    error: str | None = None
    """Why a file present in the run dir could not be used, for a UI badge."""
    note: str | None = None
    """Why an ``aborted`` run ended ("killed by signal 9", "process vanished")."""
    summary_unreadable: bool = False
    """summary.json exists but could not be read (torn or garbage): rebuild from rows."""


def read_run_status(run_dir: Path) -> RunStatus:
    """Read scheduler.json, summary.json and ``_DONE`` and derive the state (DESIGN §3)."""
    run_dir = Path(run_dir)
    errors: list[str] = []
    root = Root.of(run_dir)  # resolved once for both reads
    scheduler = _read_optional_object(root, SCHEDULER_FILENAME, errors)
    summary = _read_optional_object(root, SUMMARY_FILENAME, errors)
    summary_exists = (run_dir / SUMMARY_FILENAME).exists()
    state = derive_state(scheduler, summary, summary_exists=summary_exists,
                         done=(run_dir / DONE_FILENAME).exists())
    note = abort_note((scheduler or {}).get("exit_code")) if state is RunState.ABORTED else None
    return RunStatus(state, summary, scheduler, "; ".join(errors) or None, note,
                     summary_unreadable=summary_exists and summary is None)


def abort_note(exit_code: Any) -> str:
    """Why a run without ``_DONE`` or a terminal summary ended, from its exit code."""
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        if exit_code < 0:
            try:
                name = signal.Signals(-exit_code).name
            except ValueError:
                name = "unknown signal"
            return f"killed by signal {-exit_code} ({name})"
        return f"exited {exit_code} without a terminal summary; see run.log"
    return "process vanished (no _DONE, no terminal summary)"


def derive_run_state(run_dir: Path) -> RunState:
    """The run's state, from its files and a liveness check of its recorded PID."""
    return read_run_status(run_dir).state


def _read_optional_object(run_dir: Root, name: str, errors: list[str]) -> dict[str, Any] | None:
    """A JSON object file of the run dir, or None if absent or unusable (noted in
    ``errors``); a symlink out of the run dir is never followed."""
    try:
        return read_object_inside(run_dir, name)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except LeavesRoot:
        errors.append(f"{name} is a symlink that leaves the run dir; not read")
    except orjson.JSONDecodeError as exc:
        errors.append(f"{name} is not valid JSON: {exc}")
    except NotAnObject:
        errors.append(f"{name} is not a JSON object")
    except OSError as exc:
        errors.append(f"{name} could not be read: {exc}")
    return None


DISK_FULL_NOTE = "disk full: {run_dir} (the run's writes found no room for longer than " \
    "EVALTUI_DISK_FULL_WAIT_SEC); resume it once there is room"


def derive_state(scheduler: Mapping[str, Any] | None, summary: Mapping[str, Any] | None, *,
                 summary_exists: bool, done: bool) -> RunState:
    """The run's state (DESIGN §3) from its scheduler.json and summary.json as read (None:
    absent or unreadable), parsed leniently (:func:`recordparse.parse_lenient`): a field that
    does not fit reads as unset, except that a cancel request is one whatever its time."""
    sched, sched_bad = parse_lenient(SchedulerRecord, scheduler) if scheduler else (None, ())
    header = parse_lenient(SummaryHeader, summary)[0] if summary else None
    status = header.status if header else None
    code = sched.exit_code if sched else None
    cancel = sched is not None and (sched.cancel_requested_at is not None
                                    or "cancel_requested_at" in sched_bad)
    if done:
        if status is not None and status is not SummaryStatus.RUNNING:
            return RunState(status.value)  # done, failed or cancelled: the run's own word
        if summary is None and summary_exists:
            # _DONE is touched last, after the final summary: the run ended cleanly and
            # only its summary is unreadable. Its exit code says how (RunExit).
            if cancel or code == RunExit.CANCELLED:
                return RunState.CANCELLED
            return RunState.FAILED if code == RunExit.FAILED else RunState.DONE
        # _DONE without a terminal summary: judge by the rules below.

    pid = sched.pid if sched else None
    has_pid = pid is not None and pid > 0
    create_time = sched.pid_create_time if sched else None
    if pid is not None and has_pid and create_time is not None:
        if PidRef(pid, create_time).alive():
            return RunState.RUNNING if summary_exists else RunState.STARTING

    # No live process from here on. A cancel request wins over "queued" so that a job
    # cancelled while waiting is never re-enqueued by a restarted backend.
    if cancel:
        return RunState.CANCELLED
    sched_state = sched.state if sched else None
    if sched_state is RunState.QUEUED and not has_pid:
        return RunState.QUEUED
    if status == SummaryStatus.CANCELLED or sched_state is RunState.CANCELLED:
        return RunState.CANCELLED
    # `failed` needs a terminal error written by the run (or by the scheduler, when the
    # run could not even be spawned); a run killed by a signal or dead without a word is
    # `aborted` (DESIGN §3), whatever its exit code.
    if status == SummaryStatus.FAILED or sched_state is RunState.FAILED:
        return RunState.FAILED
    if code == RunExit.DISK_FULL:  # it said why the only way it could
        return RunState.FAILED
    return RunState.ABORTED
