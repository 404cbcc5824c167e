"""A set's members as Slurm job arrays: :class:`SlurmArrayTarget`, the
:class:`~evaltui.sets.targets.SetTarget` of a set whose executor is a batch system's
(``base.executor: slurm``; docs/slurm.md, "Sets as job arrays").

``submit`` and ``resume`` only write: a new run dir for a member's spec, or a finished
member's run dir queued again (its ``ok`` episodes stay, the run re-runs the others).
``flush``, at the end of each :class:`~evaltui.sets.runner.SetRunner` step, sends what
they wrote as one ``sbatch --array=I,J,...%P`` (:mod:`evaltui.sets.slurmarray`), held
until every run dir knows its task and the manifest is written, then released; where
Slurm refuses it, the run dirs it would have run are taken back and :class:`SubmitRefused`
names the field. A member is read from Slurm while its task is in the queue (a requeued
run reads finished for a moment between its end and its restart), from its run dir once
it has left it, through the one follower (:mod:`evaltui.slurm.follow`). ``cancel`` is
scancel of the member's array; ``close`` waits for the cancelled tasks to leave the queue.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltui.contract.records import SPEC_FILENAME
from evaltui.contract.setspec import DEFAULT_ARRAY_PARALLELISM
from evaltui.contract.states import RunState
from evaltui.contract.views import Run, run_view
from evaltui.engine.graph.specchecks import validate_spec
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import outputs_root, runs_root
from evaltui.rundir.status import RunStatus, read_run_status
from evaltui.rundir.store import reset_for_rerun, update_scheduler_record, write_run
from evaltui.sets.memberruns import member_runs
from evaltui.sets.plan import SetPlan
from evaltui.sets.slurmarray import (
    LOG_DIRNAME,
    ArrayManifest,
    ArrayTask,
    array_tasks,
    member_slurm,
    release,
    submit_held,
)
from evaltui.sets.targets import ResumeRefused, RunGone, SubmitRefused, TargetError
from evaltui.slurm.commands import SlurmError
from evaltui.slurm.control import cancel
from evaltui.slurm.follow import follow_status, record_slurm_end, shared_queue, slurm_job_of

CANCEL_WAIT_SEC = 60.0
"""How long ``close`` waits for cancelled tasks to leave Slurm's queue."""


@dataclass(frozen=True)
class _Due:
    """A member written, waiting for the next array."""

    index: int
    run_dir: Path
    key: str
    spec: dict[str, Any]
    new: bool
    """Its run dir was made for this array (else: requeued)."""


class SlurmArrayTarget:
    """The set at ``set_path``: its members as tasks of job arrays, at most ``parallelism``
    of an array at once; ``say`` gets a line per array sent and per cancel."""

    def __init__(self, set_path: Path, set_id: str, outputs: str | os.PathLike[str] | None,
                 parallelism: int, *, say: Callable[[str], Any] | None = None,
                 wait_sec: float = CANCEL_WAIT_SEC) -> None:
        self.path, self.set_id, self.parallelism = Path(set_path), set_id, parallelism
        self.outputs = outputs_root(outputs)
        self.label = f"Slurm job arrays (at most {parallelism} at once)"
        self.say = say or (lambda _line: None)
        self.wait_sec = wait_sec
        self.manifest = ArrayManifest.read(self.path)
        self.sent: list[str] = []
        """The array jobs this target submitted."""
        self.cancelled: dict[str, str] = {}
        """Task id -> array job of each task scancelled."""
        self._due: list[_Due] = []
        self._flushed = False

    @classmethod
    def of_plan(cls, plan: SetPlan, outputs: str | os.PathLike[str] | None,
                **options: Any) -> SlurmArrayTarget:
        """The target of a planned set (its ``base.slurm_array_parallelism``)."""
        return cls(plan.path, plan.set_id, outputs, plan.setfile.base.slurm_array_parallelism
                   or DEFAULT_ARRAY_PARALLELISM, **options)

    # ---- submitting ---------------------------------------------------------------------
    def submit(self, spec: dict[str, Any]) -> str:
        checked = validate_spec(spec)  # SpecError names the field
        key = str(spec["scheduling"]["set_member"]).rpartition("#")[0]
        run_dir = write_run(checked, self.outputs)
        self._queue(run_dir, key, spec, new=True)
        return run_dir.name

    def resume(self, run_id: str, more: int | None = None) -> None:
        if more is not None:  # a racing set's round: refused for Slurm sets at the set file
            raise ResumeRefused("a Slurm array member cannot be continued past its stop")
        run_dir = runs_root(self.outputs) / run_id
        try:
            spec = read_json(run_dir / SPEC_FILENAME)
        except (OSError, ValueError):
            raise ResumeRefused(f"run {run_id}: no spec to run again") from None
        key = str((spec.get("scheduling") or {}).get("set_member") or "").rpartition("#")[0]
        reset_for_rerun(run_dir)
        self._queue(run_dir, key, spec, new=False)

    def _queue(self, run_dir: Path, key: str, spec: dict[str, Any], *, new: bool) -> None:
        index = self.manifest.index_of(key)
        self.manifest.tasks.setdefault(index, ArrayTask(str(run_dir), "", key))  # taken
        self._due.append(_Due(index, run_dir, key, spec, new))

    def flush(self) -> None:
        """One array of every member written since the last flush."""
        due, self._due = self._due, []
        first, self._flushed = not self._flushed, True
        if not due:
            if first and not self.sent:
                self.say("nothing to submit (every member done or in Slurm's queue)")
            return
        specs = [d.spec for d in due]
        try:
            job = submit_held(self.path, self.set_id, [d.index for d in due],
                              member_slurm(specs), array_tasks(specs), self.parallelism)
        except (SlurmError, ValueError) as exc:
            self._take_back(due, str(exc))
            raise SubmitRefused(str(exc) if str(exc).startswith("eval.") else
                                f"base.slurm: {exc}") from None
        try:
            for d in due:
                update_scheduler_record(d.run_dir, slurm_job_id=f"{job}_{d.index}")
                self.manifest.tasks[d.index] = ArrayTask(str(d.run_dir), job, d.key)
            self.manifest.jobs.append(job)
            (self.path / LOG_DIRNAME).mkdir(exist_ok=True)
            self.manifest.write(self.path)
            release(job)
        except BaseException:
            cancel(job)  # held: none of its tasks has started
            raise
        self.sent.append(job)
        self.say(f"Slurm array job {job}: {len(due)} member(s), at most {self.parallelism} "
                 "at once")

    def _take_back(self, due: list[_Due], why: str) -> None:
        """A refused array: its new run dirs never ran (gone), its requeued ones failed."""
        for d in due:
            if not self.manifest.tasks[d.index].job:  # taken for this array only
                del self.manifest.tasks[d.index]
            if d.new:
                shutil.rmtree(d.run_dir, ignore_errors=True)
            else:
                update_scheduler_record(d.run_dir, state=RunState.FAILED,
                                        error=f"not submitted: {why}")

    def member_runs(self, set_id: str) -> dict[str, str]:
        """(One written but never sent reads ``aborted``, and is resumed: sent.)"""
        return member_runs(self.outputs, set_id)

    # ---- reading ------------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run:
        run_dir = runs_root(self.outputs) / run_id
        if not run_dir.is_dir():
            raise RunGone(f"no run {run_id}")
        status = read_run_status(run_dir)
        task = slurm_job_of(status.scheduler)
        if task is None:  # written by a call that ended before it sent the array
            return _view(run_dir, status, RunState.ABORTED, "never submitted to Slurm")
        try:
            info = shared_queue().active([task]).get(task)
        except SlurmError as exc:
            raise TargetError(str(exc)) from None
        if info is not None:  # in the queue (not ended): Slurm's word
            state, reason = info.run_state()
            return _view(run_dir, status, state, reason if state is RunState.QUEUED else None)
        recorded = (status.scheduler or {}).get("state")
        if status.state.terminal and (status.state is not RunState.ABORTED
                                      or recorded == RunState.ABORTED.value):
            return _view(run_dir, status, status.state, None)
        followed = follow_status(run_dir, status)  # the run dir said nothing final
        if followed.state.terminal:  # Slurm's last word, kept for later readers
            record_slurm_end(run_dir, followed.state, followed.note)
        return _view(run_dir, status, followed.state, followed.note)

    # ---- cancelling ---------------------------------------------------------------------
    def cancel(self, run_id: str) -> None:
        """scancel of the member's array job, all of it: a set is cancelled whole, and
        one scancel leaves no moment for the throttle to start a task being cancelled."""
        task = slurm_job_of(read_run_status(runs_root(self.outputs) / run_id).scheduler)
        try:  # the queue as it was when the cancel began
            queued = task is not None and task in shared_queue().active(
                [task], fresh=not self.cancelled)
            if queued and (job := task.split("_")[0]) not in self.cancelled.values():
                cancel(job)
        except SlurmError as exc:
            raise TargetError(str(exc)) from None
        if not queued:
            raise TargetError(f"run {run_id}: its task is not in Slurm's queue")
        self.cancelled[task] = job

    def close(self) -> None:
        """After a cancel: wait (at most ``wait_sec``) for the tasks to leave the queue."""
        if not self.cancelled:
            return
        deadline = time.monotonic() + self.wait_sec
        while time.monotonic() < deadline:
            try:
                if not shared_queue().active(self.cancelled, fresh=True):
                    break
            except SlurmError:
                break
            time.sleep(0.2)
        jobs = sorted(set(self.cancelled.values()), key=int)
        self.say(f"set {self.set_id}: scancel of Slurm array job(s) {', '.join(jobs)} "
                 f"({len(self.cancelled)} task(s) queued or running)")


def _view(run_dir: Path, status: RunStatus, state: RunState, note: str | None) -> Run:
    queued = state is RunState.QUEUED
    return run_view(run_dir.name, run_dir, state, status.scheduler, status.summary,
                    waiting_reason=note if queued else None,
                    error=None if queued else note or status.error)
