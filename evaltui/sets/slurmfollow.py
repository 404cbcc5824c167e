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
from evaltui.rundir.status import RunStatus, read_run_status
from evaltui.sets.runner import MemberLive
from evaltui.sets.setdir import write_set
from evaltui.sets.slurmarray import ArrayManifest
from evaltui.slurm.follow import follow_status, record_slurm_end, shared_queue
from evaltui.slurm.jobinfo import SlurmJobInfo

_FINAL = frozenset(s for s in RunState if s.terminal)


@dataclass(frozen=True)
class TaskReading:
    """A member's state now and why (None: nothing to say)."""

    state: MemberState
    note: str | None = None


def queued_tasks(manifest: ArrayManifest, *, fresh: bool = False) -> dict[str, SlurmJobInfo]:
    """The manifest's tasks in Slurm's queue now (not yet ended), by task id
    (``JOB_TASK``): one read of the queue shared by every follower of this process
    (:class:`evaltui.slurm.follow.SlurmQueue`), or a new one with ``fresh``."""
    tasks = [manifest.task_id(i) for i, t in manifest.tasks.items() if t.job]
    return shared_queue().active(tasks, fresh=fresh)


def read_member(manifest: ArrayManifest, index: int, queued: dict[str, SlurmJobInfo]
                ) -> TaskReading:
    """Member ``index``'s state: Slurm's while its task is queued, else its run dir's
    (Slurm's last word written into the run dir where the run said nothing final)."""
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
    recorded = (status.scheduler or {}).get("state")
    if status.state in _FINAL and (status.state is not RunState.ABORTED
                                   or recorded == RunState.ABORTED.value):
        return TaskReading(MemberState(status.state.value), _why(status))
    # out of the queue, the run dir says nothing final: the one follower's reading
    followed = follow_status(run_dir, status)
    if not followed.state.terminal:  # just leaving the queue or not there yet
        return TaskReading(MemberState(followed.state.value), followed.note)
    record_slurm_end(run_dir, followed.state, followed.note)
    return TaskReading(MemberState(followed.state.value), followed.note or _why(status))


def _why(status: RunStatus) -> str | None:
    summary = status.summary or {}
    error = summary.get("error") if isinstance(summary, dict) else None
    return str(error).splitlines()[0] if error else None


def refresh(record: SetRecord, manifest: ArrayManifest, path: Path,
            printer: Callable[[list[Any]], None] | None = None) -> bool:
    """Read every submitted member once, write set.json if a state changed; True when
    every member has finished. ``printer`` gets each member's MemberLive."""

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
