"""A run's life in the scheduler: submit, cancel, resume, reprioritise, wait, finalize.

Starting an admitted run is starting.py's; deciding who starts is ticking.py's. Every
state change goes through ``Core.transition`` (memory, scheduler.json, event together).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evaltui.contract.records import (
    EPISODE_FILENAME,
    SPEC_FILENAME,
    SUMMARY_FILENAME,
    SchedulerRecord,
)
from evaltui.contract.spec import JobSpec, SpecError, parse_spec
from evaltui.contract.states import EpisodeStatus, RunExit, RunState
from evaltui.engine.executor.kinds import executor_of
from evaltui.engine.graph.specchecks import check_spec, validate_in_workspace
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import episode_dir, now_iso
from evaltui.rundir.status import DISK_FULL_NOTE, abort_note, derive_run_state, read_run_status
from evaltui.rundir.store import (
    change_scheduler_record,
    read_record,
    reset_for_rerun,
    scheduler_record,
    write_run,
)
from evaltui.scheduler.admission.calibration import Estimate, nodeset_parts
from evaltui.scheduler.core import Core, NotQueued, NotResumable, Write
from evaltui.scheduler.runs.jobs import Job
from evaltui.scheduler.runs.restore import record_ref
from evaltui.scheduler.runs.resumemore import prepare_more
from evaltui.slurm.commands import SlurmError
from evaltui.slurm.follow import cancel_slurm_run, follow_status, slurm_job_of
from evaltui.slurm.runsubmit import resubmit_run, submit_run

log = logging.getLogger(__name__)

RESUMABLE = frozenset({RunState.ABORTED, RunState.CANCELLED, RunState.FAILED, RunState.DONE})


class Lifecycle:
    """Requests on runs (any thread) and the end of running ones (the loop thread)."""

    def __init__(self, core: Core, learn: Callable[[Job], None]) -> None:
        self.core = core
        self._learn = learn  # calibrate from a run that finished well (sampling.py)

    # ---- requests -----------------------------------------------------------------------
    def submit(self, spec: JobSpec | Mapping[str, Any]) -> Submitted:
        """Validate ``spec``, write its run dir and enqueue it; see JobScheduler.submit.

        The spec is parsed once (not at all when it comes parsed, from the API) and
        checked once, importing its nodesets; the run process checks it once more in its
        own interpreter, where the nodesets run. The record written is the one the job
        holds: nothing is read back.
        """
        c = self.core
        _importable_workspace(spec)
        if executor_of(spec).batch:
            return _submit_to_slurm(spec, c.outputs)  # Slurm schedules it, not admission
        # Not built here: a nodeset's own environment that the cache lacks is built while
        # the run waits in the queue (envbuilds.py), and checked then.
        checked = check_spec(spec if isinstance(spec, JobSpec) else parse_spec(spec),
                             build=False)
        parts = nodeset_parts(checked.spec)
        estimate = c.calibration.estimate(checked.spec, parts, c.shared_keys())
        record = scheduler_record(checked, record_extra={
            **estimate_fields(estimate), "measured_peak_mb": None, "gpu": None,
            "waiting_reason": "queued: admission at the next tick", "waiting_kind": None,
            "scheduler_pid": os.getpid(), "owner": str(c.owner),
            "warnings": list(checked.warnings)})  # shown by submit (API, CLI, TUI)
        run_dir = write_run(checked, c.outputs, record=record)
        job = self._queue_written(run_dir, record, checked.spec, estimate, None)
        return Submitted(job.run_id, RunState.QUEUED, checked.warnings, checked.notes)

    def cancel(self, run_id: str) -> RunState:
        """Cancel a queued or running run; see JobScheduler.cancel."""
        c = self.core
        with c.lock:
            job = c.jobs.get(run_id)
        if job is None:
            return self._cancel_foreign(run_id)  # takes the ledger lock: not under ours
        with c.lock:
            if job.state is RunState.QUEUED:
                c.queue.remove(job)
                c.jobs.pop(run_id, None)
                c.transition(job, RunState.CANCELLED, cancel_requested_at=now_iso(),
                             waiting_reason=None, waiting_kind=None)
            elif not job.state.terminal and job.handle is not None and not job.cancelling:
                job.cancelling = True
                job.set(cancel_requested_at=now_iso())
                c.writer.write(job)
                c.terminate_later(job.handle.ref)
            state = job.state
        c.emit_pending()
        return state

    def _cancel_foreign(self, run_id: str) -> RunState:
        """Cancel a run this scheduler does not track (another backend's, or ``evaltui eval``'s).

        Under the ledger lock, which every admission holds from its last look at the
        record to the spawn: the owner either has not started the run (and will see the
        request) or has recorded its PID (and the run gets the signal).
        """
        c = self.core
        run_dir = c.run_dir(run_id)
        if job := slurm_job_of(read_record(run_dir)):  # Slurm runs it: scancel
            cancel_slurm_run(run_dir, job)
            return derive_run_state(run_dir)
        state = RunState.QUEUED

        def cancel(_record: Mapping[str, Any] | None) -> dict[str, Any] | None:
            nonlocal state
            state = derive_run_state(run_dir)
            if state.terminal:
                return None
            fields: dict[str, Any] = {"cancel_requested_at": now_iso()}
            if state is RunState.QUEUED:
                fields["state"] = RunState.CANCELLED
            return fields

        with c.ledger.transaction():
            record = change_scheduler_record(run_dir, cancel)
        if record is None:
            return state
        ref = record_ref(record)
        if state in (RunState.STARTING, RunState.RUNNING) and ref is not None:
            c.terminate_later(ref)
        return derive_run_state(run_dir)

    def resume(self, run_id: str, more: int | None = None) -> RunState:
        """Queue a finished run again for its episodes that are not ``ok``; see
        JobScheduler.resume (``more``: past its stop rule, :mod:`.resumemore`)."""
        c = self.core
        run_dir = c.run_dir(run_id)
        with c.lock:
            if run_id in c.jobs:
                raise NotResumable(f"run {run_id} is {c.jobs[run_id].state.value}")
        if more is not None:
            prepare_more(run_dir, derive_run_state(run_dir), more)
        if slurm_job_of(read_record(run_dir)):  # Slurm runs it: its job is submitted again
            return _resume_on_slurm(run_dir)
        checked = _resumable(run_dir, derive_run_state(run_dir), build=False)
        estimate = c.calibration.estimate(checked.spec, nodeset_parts(checked.spec),
                                          c.shared_keys())
        state = derive_run_state(run_dir)

        def still_resumable(old: SchedulerRecord | None) -> None:
            nonlocal state
            state = derive_run_state(run_dir)  # again: another backend may have resumed it
            if state not in RESUMABLE or old is None:
                raise NotResumable(f"run {run_id} is {state.value}; only finished runs resume")

        record = reset_for_rerun(
            run_dir, check=still_resumable,
            waiting_reason="queued (resume): admission at the next tick",
            scheduler_pid=os.getpid(), owner=str(c.owner), **estimate_fields(estimate))
        self._queue_written(run_dir, record, checked.spec, estimate, state)
        return RunState.QUEUED

    def _queue_written(self, run_dir: Path, record: SchedulerRecord, spec: JobSpec,
                       estimate: Estimate, previous: RunState | None) -> Job:
        """Queue the job of a run whose queued record is on disk (``previous``: the state
        it comes from, None for a new run) and wake the ticker to admit it."""
        c = self.core
        with c.lock:
            job = c.new_job(run_dir, record, spec)
            job.estimate, job.estimate_version = estimate, c.estimate_version()
            c.enqueue(job, previous)
        c.emit_pending()
        c.nudge()
        return job

    def set_priority(self, run_id: str, priority: int) -> RunState:
        """Move a queued job in the queue; see JobScheduler.set_priority."""
        if not isinstance(priority, int) or not -100 <= priority <= 100:
            raise ValueError(f"priority must be an integer in [-100, 100], got {priority!r}")
        c = self.core
        c.run_dir(run_id)
        with c.lock:
            job = c.jobs.get(run_id)
            if job is None or job.state is not RunState.QUEUED or job.loading is not None:
                state = job.state.value if job is not None else "not queued here"
                raise NotQueued(f"run {run_id} is {state}; only a queued job changes priority")
            c.queue.remove(job)
            job.set(priority=priority)
            c.queue.add(job)
            c.writer.write(job)
        c.nudge()
        return RunState.QUEUED

    def wait(self, run_id: str, timeout: float | None, read_state: Callable[[str], RunState]
             ) -> RunState:
        """Block until the run is terminal or ``timeout``; see JobScheduler.wait."""
        c = self.core
        deadline = None if timeout is None else time.monotonic() + timeout
        with c.changed:
            while True:
                job = c.jobs.get(run_id)
                state = job.state if job is not None else read_state(run_id)
                left = None if deadline is None else deadline - time.monotonic()
                if state.terminal or (left is not None and left <= 0):
                    return state
                c.changed.wait(left if job is not None else min(left or 0.5, 0.5))

    # ---- running runs (loop thread) -----------------------------------------------------
    def observe_started(self) -> None:
        """A starting run that wrote its summary.json is running."""
        c = self.core
        with c.lock:
            for job in c.running.values():
                if job.state is RunState.STARTING and os.path.exists(
                        os.path.join(job.run_dir, SUMMARY_FILENAME)):
                    c.transition(job, RunState.RUNNING, write=Write.SOON)

    def reap(self) -> None:
        """Finalize every run whose process has exited."""
        c = self.core
        with c.lock:
            done = [j for j in c.running.values() if j.handle is not None
                    and j.handle.exited()]
        for job in done:
            self._finalize(job)

    def _finalize(self, job: Job) -> None:
        c = self.core
        assert job.handle is not None
        code = job.handle.finish()
        with c.lock:
            job.set(finished_at=now_iso(), measured_peak_mb=job.peak_vram_mb,
                    measured_peak_ram_mb=round(job.peak_ram_mb) or None)
            if code is not None:
                job.set(exit_code=code)
        c.writer.write(job)  # the exit code on disk first: the state derives from it
        state = derive_run_state(job.run_dir)
        if code == RunExit.DISK_FULL and state is RunState.ABORTED:
            state = RunState.FAILED  # its exit code is all it could write: disk full
        if not state.terminal:  # its PID is dead: only a race with the files gets here
            state = RunState.ABORTED
        with c.lock:
            c.running.pop(job.run_id, None)
            c.jobs.pop(job.run_id, None)
            c.shared.release(job.run_id, c.tick_no)
            c.report(*c.episodes.unwatch(job.run_id))
            aborted: dict[str, Any] = ({"error": abort_note(job.record.exit_code)}
                                       if state is RunState.ABORTED else {})
            if code == RunExit.DISK_FULL:
                aborted = {"error": DISK_FULL_NOTE.format(run_dir=job.run_dir)}
            c.transition(job, state, **aborted)  # on disk before anyone is told
        if state is RunState.DONE:
            self._learn(job)


def estimate_fields(estimate: Estimate) -> dict[str, Any]:
    """The record fields of an estimate."""
    return {"estimate_mb": estimate.vram_mb, "ram_estimate_mb": estimate.ram_mb,
            "estimate_source": estimate.source}


class Submitted(tuple[str, RunState]):
    """What submit returns: ``(run_id, state)`` (it unpacks as that pair), and the
    ``warnings`` validation gave (also in scheduler.json) and the ``notes`` the nodesets'
    own checks gave (a benchmark's renderer), so no caller reads them back."""

    warnings: tuple[str, ...]
    notes: tuple[str, ...]

    def __new__(cls, run_id: str, state: RunState, warnings: Sequence[str] = (),
                notes: Sequence[str] = ()) -> Submitted:
        self = super().__new__(cls, (run_id, state))
        self.warnings, self.notes = tuple(warnings), tuple(notes)
        return self

    @property
    def run_id(self) -> str:
        return self[0]

    @property
    def state(self) -> RunState:
        return self[1]


def _importable_workspace(spec: Any) -> None:
    """Put the spec's workspace on sys.path so its nodesets import during validation."""
    workspace = (spec.active_workspace_dir if isinstance(spec, JobSpec)
                 else spec.get("active_workspace_dir") if isinstance(spec, Mapping) else None)
    if isinstance(workspace, str) and workspace and workspace not in sys.path:
        sys.path.insert(0, workspace)


def _episode_ok(run_dir: Path, index: int) -> bool:
    try:
        row = read_json(episode_dir(run_dir, index) / EPISODE_FILENAME)
    except (OSError, ValueError):
        return False
    return isinstance(row, dict) and row.get("status") == EpisodeStatus.OK.value


def _submit_to_slurm(spec: JobSpec | Mapping[str, Any], outputs: Path) -> Submitted:
    """A Slurm run submitted as ``evaltui eval --executor slurm`` submits it (sbatch from
    here, the run dir under ``outputs``) and followed by the run index; Slurm's refusal as
    a SpecError on the field it names (``eval.slurm.partition: ...``)."""

    data = spec.to_json_dict() if isinstance(spec, JobSpec) else spec
    checked = validate_in_workspace(data)
    try:
        submitted = submit_run(checked, outputs)
    except SlurmError as exc:
        field, sep, message = str(exc).partition(": ")
        if sep and field.startswith("eval."):
            raise SpecError(field, message) from None
        raise SpecError("eval.executor", str(exc)) from None
    return Submitted(submitted.run_dir.name, RunState.QUEUED, checked.warnings, checked.notes)


def _resumable(run_dir: Path, state: RunState, build: bool = True) -> Any:
    """The checked spec of a run that may resume from ``state`` (some episode not yet
    ``ok``); NotResumable (or SpecError) why not. ``build=False``: an environment the cache
    lacks is built in the queue (envbuilds.py), not here."""
    if state not in RESUMABLE:
        raise NotResumable(f"run {run_dir.name} is {state.value}; only finished runs resume")
    try:
        spec_data = read_json(run_dir / SPEC_FILENAME)
    except (OSError, ValueError) as exc:
        raise SpecError(SPEC_FILENAME, f"cannot read the run's spec: {exc}") from None
    _importable_workspace(spec_data)
    checked = check_spec(parse_spec(spec_data), build=build)
    if all(_episode_ok(run_dir, i) for i in checked.episode_indices):
        raise NotResumable(f"run {run_dir.name}: every selected episode is ok already")
    return checked


def _resume_on_slurm(run_dir: Path) -> RunState:
    """A finished Slurm run (its state as followed: Slurm's word where the run dir has
    none) resumed as a new job into the same run dir (``slurm/runsubmit.py``)."""

    state = follow_status(run_dir, read_run_status(run_dir)).state
    checked = _resumable(run_dir, state)
    try:
        resubmit_run(run_dir, checked, state.value)
    except SlurmError as exc:
        raise NotResumable(f"run {run_dir.name}: {exc}") from None
    return RunState.QUEUED
