"""The members of a set's Slurm arrays, read: each member's state from Slurm while its task
is in the queue, from its run dir once it has left it.

While a task is queued or running, Slurm's word wins (``queued`` with its reason:
``JobArrayTaskLimit`` is the throttle, ``Priority``, ``Resources``, ...): a requeued run
reads finished for a moment between its end and its restart. Once the task has left the
queue, the run dir is the truth; where it says nothing terminal (cancelled while
pending, killed before it could write its summary), Slurm's final state is written into
its scheduler.json as the run's state, Slurm's word in its note, as ``eval --executor
slurm`` does for its one job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltui.contract.setspec import MemberState, SetRecord
from evaltui.contract.states import RunState
from evaltui.sets.slurmarray import ArrayManifest
from evaltui.slurm.jobinfo import SlurmJobInfo

_FINAL = (RunState.DONE, RunState.FAILED, RunState.CANCELLED)


@dataclass(frozen=True)
class TaskReading:
    """A member's state now and why (None: nothing to say)."""

    state: MemberState
    note: str | None = None


def queued_tasks(manifest: ArrayManifest) -> dict[str, SlurmJobInfo]:
    """The manifest's tasks in Slurm's queue now, by task id (``JOB_TASK``)."""
    from evaltui.slurm.jobinfo import queue

    found: dict[str, SlurmJobInfo] = {}
    # one job at a time: squeue refuses a whole list for one job it has forgotten
    for job in sorted({t.job for t in manifest.tasks.values()}):
        found.update((str(info.job_id), info) for info in queue(job)
                     if info.job_id.task is not None)
    return found


def read_member(manifest: ArrayManifest, index: int, queued: dict[str, SlurmJobInfo]
                ) -> TaskReading:
    """Member ``index``'s state: Slurm's while its task is queued, else its run dir's
    (Slurm's last word written into the run dir where the run said nothing final)."""
    from evaltui.rundir.status import read_run_status

    task_id = manifest.task_id(index)
    info = queued.get(task_id)
    if info is not None:
        state, reason = info.run_state()
        if state is RunState.QUEUED:
            return TaskReading(MemberState.QUEUED, reason)
        if not state.terminal:
            return TaskReading(MemberState(state.value))
    run_dir = Path(manifest.tasks[index].run_dir)
    status = read_run_status(run_dir)
    if status.state in _FINAL:
        return TaskReading(MemberState(status.state.value), _why(status))
    return _ended_without_word(run_dir, task_id)


def _why(status: object) -> str | None:
    summary = getattr(status, "summary", None) or {}
    error = summary.get("error") if isinstance(summary, dict) else None
    return str(error).splitlines()[0] if error else None


def _ended_without_word(run_dir: Path, task_id: str) -> TaskReading:
    """A task out of the queue whose run dir says nothing final: Slurm's final state
    (``scontrol show job``), kept in the run dir."""
    from evaltui.rundir.store import update_scheduler_record
    from evaltui.slurm.commands import SlurmError
    from evaltui.slurm.jobinfo import show_job

    try:
        infos = show_job(task_id)
    except SlurmError as exc:
        return TaskReading(MemberState.RUNNING, str(exc))  # ask again at the next poll
    if infos:
        state, reason = infos[0].run_state()
        if not state.terminal:  # just leaving the queue or not there yet
            return TaskReading(MemberState(state.value), reason)
    else:
        state, reason = RunState.ABORTED, (f"Slurm no longer knows job {task_id} and its "
                                           "run dir says the run did not end")
    update_scheduler_record(run_dir, state=state.value, note=reason)
    return TaskReading(MemberState(state.value), reason)


def refresh(record: SetRecord, manifest: ArrayManifest, path: Path,
            printer: Callable[[list[Any]], None] | None = None) -> bool:
    """Read every submitted member once, write set.json if a state changed; True when
    every member has finished. ``printer`` gets each member's MemberLive."""
    from evaltui.sets.runner import MemberLive
    from evaltui.sets.setdir import write_set

    queued = queued_tasks(manifest)
    by_key = {t.key: i for i, t in manifest.tasks.items() if t.job}
    changed, lives = False, []
    for rec in record.members:
        note = None
        if rec.key in by_key:
            reading = read_member(manifest, by_key[rec.key], queued)
            note = reading.note
            if reading.state is not rec.state:
                rec.state, changed = reading.state, True
                rec.error = note if reading.state in (MemberState.FAILED,
                                                      MemberState.ABORTED) else None
        lives.append(MemberLive(rec, None, note if not rec.state.finished else None))
    if changed:
        write_set(path, record)
    if printer is not None:
        printer(lives)
    return all(rec.state.finished for rec in record.members)
