"""The run-dir record store: a checked spec's run dir written, and scheduler.json changed only
through this module.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import psutil

from evaltui.contract.recordparse import parse_lenient
from evaltui.contract.records import (
    DONE_FILENAME,
    REQUEUE_REFUSED_FILENAME,
    SCHEDULER_FILENAME,
    SHARED_URLS_FILENAME,
    SPEC_FILENAME,
    SUMMARY_FILENAME,
    SchedulerRecord,
)
from evaltui.contract.spec import JobSpec
from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import flocked, read_json, read_json_object, write_json_atomic
from evaltui.rundir.layout import allocate_run_dir, now_iso, runs_root


class SpecToWrite(Protocol):
    """What a run dir is written from: a spec the engine checked
    (``engine.graph.specchecks.CheckedSpec``; this layer below the engine names only what it
    reads of it)."""

    @property
    def spec(self) -> JobSpec: ...


def outputs_problem(outputs: Path) -> str | None:
    """Why runs cannot be written under ``outputs`` (one line), else None; creates it
    (and its parents) when missing -- as the first run would."""
    if outputs.exists() and not outputs.is_dir():
        return f"outputs {outputs}: not a directory"
    try:
        outputs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"outputs {outputs}: cannot create it ({exc.strerror or exc})"
    if not os.access(outputs, os.W_OK | os.X_OK):
        return f"outputs {outputs}: not writable"
    return None


def scheduler_record(checked: SpecToWrite, *, state: RunState = RunState.QUEUED,
                     record_extra: Mapping[str, Any] | None = None) -> SchedulerRecord:
    """The scheduler.json of a new run of ``checked`` (plus ``record_extra`` fields, e.g.
    the scheduler's estimate, or the PID of a run process that writes its own run dir).
    Through the record's model, so a mistyped field fails here and not in a reader."""
    fields: dict[str, Any] = {
        "queued_at": now_iso(), "admitted_at": None, "pid": None, "pid_create_time": None,
        "reservation": None, "cancel_requested_at": None, "exit_code": None,
        **(record_extra or {})}
    return SchedulerRecord(state=state, priority=checked.spec.scheduling.priority, **fields)


def write_run(checked: SpecToWrite, outputs: Path, *, state: RunState = RunState.QUEUED,
              record_extra: Mapping[str, Any] | None = None,
              record: SchedulerRecord | None = None) -> Path:
    """Allocate the run dir of a validated spec; write spec.json, shared_urls.json and
    scheduler.json: ``record``, or :func:`scheduler_record` of ``state`` and
    ``record_extra``."""
    if record is None:
        record = scheduler_record(checked, state=state, record_extra=record_extra)
    # Written into a staging dir first, then renamed over the run id's reservation (an
    # empty dir) right after it is made: a process killed while writing leaves no
    # half-made run dir (reap_cut_short removes the staging dir it leaves).
    staging_root = Path(outputs) / STAGING_DIRNAME  # beside eval_runs/: never listed as a run
    staging = staging_root / f"{secrets.token_hex(4)}.{os.getpid()}"
    run_dir: Path | None = None
    try:
        _make_staging(staging)
        write_json_atomic(staging / SPEC_FILENAME, checked.spec.to_json_dict())
        write_json_atomic(staging / SHARED_URLS_FILENAME, dict(checked.spec.shared_urls))
        # Only the fields given are written (later updates merge theirs in).
        write_json_atomic(staging / SCHEDULER_FILENAME,
                          record.model_dump(mode="json", exclude_unset=True))
        run_dir = allocate_run_dir(outputs)
        os.rename(staging, run_dir)
        with contextlib.suppress(OSError):
            staging_root.rmdir()  # while no other write_run uses it: the outputs stay tidy
    except BaseException:
        # A write failed (a full disk: OSError): a half-written run dir would list as an
        # aborted run, so none is left.
        shutil.rmtree(staging, ignore_errors=True)
        if run_dir is not None:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return run_dir


def _make_staging(staging: Path) -> None:
    for _ in range(3):  # another write_run may remove the emptied parent in between
        try:
            staging.mkdir(parents=True)
            return
        except FileNotFoundError:
            continue
    staging.mkdir(parents=True)


STAGING_DIRNAME = ".evaltui-staging"


"""Under the outputs root: run dirs being written (``{random}.{pid}``), renamed into
eval_runs/ once whole."""


EMPTY_RUN_DIR_SEC = 10.0


"""A run dir still empty this long after it was made was cut short between its
allocation and the rename (a write_run fills it within microseconds)."""


def reap_cut_short(outputs: Path) -> list[str]:
    """Remove what :func:`write_run`s killed while writing left under ``outputs``: staging
    dirs of dead processes, and run dirs still empty after :data:`EMPTY_RUN_DIR_SEC`;
    the names removed."""
    removed = []
    staging_root = Path(outputs) / STAGING_DIRNAME
    for staging in staging_root.iterdir() if staging_root.is_dir() else ():
        pid = staging.name.rpartition(".")[2]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(staging, ignore_errors=True)
            removed.append(staging.name)
    old = time.time() - EMPTY_RUN_DIR_SEC
    runs_dir = runs_root(outputs)
    for run_dir in runs_dir.iterdir() if runs_dir.is_dir() else ():
        try:
            if run_dir.stat().st_mtime < old and not any(run_dir.iterdir()):
                run_dir.rmdir()  # only while empty: never a written run
                removed.append(run_dir.name)
        except OSError:
            continue
    return removed


@contextmanager
def scheduler_record_lock(run_dir: Path) -> Iterator[None]:
    """Exclusive access to a run's scheduler.json for a read-modify-write.

    The lock is ``flock`` on the run dir itself (no extra file in the layout): the file is
    replaced on every write, so it cannot carry the lock. Every writer of scheduler.json
    (schedulers, ``evaltui eval``, a cancel from another backend) takes it, so that no
    update is lost between two of them.
    """
    with flocked(run_dir, os.O_RDONLY | os.O_DIRECTORY):
        yield


def settle_summary(run_dir: Path, state: str, error: str | None) -> None:
    """A run that ended without writing its last summary (its disk was full, it was
    killed) keeps ``status: running`` in summary.json: set the state it ended in (and why)
    there too, once scheduler.json records it. Raises OSError if it cannot be written."""
    path = run_dir / SUMMARY_FILENAME
    with scheduler_record_lock(run_dir):
        try:
            summary = read_json(path)
        except (FileNotFoundError, ValueError):
            return  # none, or not ours to mend: the status reads go by scheduler.json
        if not isinstance(summary, dict) or summary.get("status") != RunState.RUNNING.value:
            return
        summary["status"] = state
        if error and not summary.get("error"):
            summary["error"] = error
        write_json_atomic(path, summary)
def _checked_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` through the record's model, as JSON: a field scheduler.json does not have,
    or a value of the wrong type, fails here (TypeError / ValueError) and not in a
    reader."""
    unknown = sorted(set(fields) - set(SchedulerRecord.model_fields))
    if unknown:
        raise TypeError(f"scheduler.json has no field {', '.join(unknown)}")
    record = SchedulerRecord.model_validate({"state": RunState.QUEUED, **fields})
    return record.model_dump(mode="json", include=set(fields), exclude_unset=True)


def read_record(run_dir: Path) -> dict[str, Any] | None:
    """A run's scheduler.json as JSON, or None if missing or unreadable. Kept raw: its
    readers check it tolerantly, and a merge writes back fields this version does not
    know."""
    return read_json_object(run_dir / SCHEDULER_FILENAME)


def _write_raw(run_dir: Path, record: Mapping[str, Any]) -> None:
    write_json_atomic(run_dir / SCHEDULER_FILENAME, dict(record))


def update_scheduler_record(run_dir: Path, **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` (checked against the record's model) into scheduler.json under its
    lock; returns the merged record. Fields this version does not know, written by a newer
    one, are kept."""
    checked = _checked_fields(fields)
    with scheduler_record_lock(run_dir):
        try:
            record = read_json(run_dir / SCHEDULER_FILENAME)
        except FileNotFoundError:
            record = {}
        if not isinstance(record, dict):
            record = {}
        record.update(checked)
        _write_raw(run_dir, record)
    return record


def change_scheduler_record(
        run_dir: Path, change: Callable[[dict[str, Any] | None], Mapping[str, Any] | None]
) -> dict[str, Any] | None:
    """A read-modify-write of scheduler.json decided under its lock: ``change`` gets the
    record as read (None: missing or unreadable) and returns the fields to merge (checked
    as in :func:`update_scheduler_record`), or None to leave the file as it is. Returns the
    record written, or None when nothing was."""
    with scheduler_record_lock(run_dir):
        record = read_record(run_dir)
        fields = change(record)
        if fields is None:
            return None
        merged = {**(record or {}), **_checked_fields(fields)}
        _write_raw(run_dir, merged)
    return merged


def request_cancel(run_dir: Path) -> dict[str, Any]:
    """Record that a cancel of the run was asked for (now); its scheduler, its run process
    and every reader take it from here."""
    return update_scheduler_record(run_dir, cancel_requested_at=now_iso())


def reset_for_rerun(run_dir: Path, *, keep: Iterable[str] = (),
                    check: Callable[[SchedulerRecord | None], None] | None = None,
                    **fields: Any) -> SchedulerRecord:
    """Queue a finished run again: the one reset that every resume, requeue and
    resubmission uses.

    A new record: what the last attempt left (its PID, reservation, exit code, peaks,
    error, Slurm's note, batch host) goes back to the model's defaults by construction;
    what describes the run itself (priority, warnings, the resume count, one more) carries
    over, with the fields named in ``keep`` (e.g. a Slurm run's job id, so that no backend
    takes it for a queued run of its own) and ``fields`` on top. ``check`` sees the old
    record under the lock and raises to refuse. ``_DONE`` and a refused requeue's mark go
    first: with either present the run would read as ended while it runs again;
    summary.json stays (the run rewrites it), so readers keep its numbers meanwhile.
    """
    with scheduler_record_lock(run_dir):
        raw = read_record(run_dir)
        old = parse_lenient(SchedulerRecord, raw)[0] if raw is not None else None
        if check is not None:
            check(old)
        now = now_iso()
        carried: dict[str, Any] = {"priority": 0, "resume_count": 1, "warnings": []}
        if old is not None:
            carried = {"priority": old.priority, "resume_count": old.resume_count + 1,
                       "warnings": old.warnings,
                       **{name: getattr(old, name) for name in keep}}
        record = SchedulerRecord.model_validate(
            {"state": RunState.QUEUED, "queued_at": now, "resumed_at": now, **carried,
             **fields})
        for name in (DONE_FILENAME, REQUEUE_REFUSED_FILENAME):
            (run_dir / name).unlink(missing_ok=True)
        _write_raw(run_dir, record.model_dump(mode="json"))
    return record
