"""Reading a Slurm run's state from a login node: its run dir is the truth, Slurm's queue a
hint (docs/slurm.md, "Following a run").

A run submitted with ``--executor slurm`` records its job in scheduler.json
(``slurm_job_id``, ``slurm_cluster``) and no pid: its process is the job's batch step, on a
node of the cluster, where no liveness check of this host can see it. So
:func:`follow_status` reads what :func:`evaltui.rundir.status.read_run_status` found and, unless
the run dir has the last word (``_DONE`` with a terminal summary, or a terminal state a
follower wrote), asks Slurm through :class:`SlurmQueue`: one ``squeue`` of every job
for every reader of this process per :data:`SQUEUE_EVERY_SEC` (a TUI refreshing a table
of 200 Slurm runs calls squeue once, not 200 times), none where Slurm is absent.

- PENDING (and requeued) -> ``queued``, Slurm's reason (Priority, Resources, ...) in the note;
- RUNNING -> ``running`` (``starting`` until the run has written its summary);
- TIMEOUT, PREEMPTED, NODE_FAIL, ... -> the run state of :data:`~evaltui.slurm.jobstate.
  RUN_STATE_OF`, Slurm's word in the note;
- gone from the queue (without slurmdbd Slurm forgets an ended job after ``MinJobAge``)
  and no ``_DONE`` -> ``aborted``: the episodes written so far are kept, a resume goes on;
- Slurm not reachable from here -> what the run dir says (``running`` once it has a
  summary), with why Slurm was not asked in the note.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from evaltui.contract.records import DONE_FILENAME, SCHEDULER_FILENAME, SUMMARY_FILENAME
from evaltui.contract.states import RunState
from evaltui.rundir.status import RunStatus
from evaltui.rundir.store import request_cancel, update_scheduler_record
from evaltui.slurm.commands import SlurmError, missing_commands, run_slurm
from evaltui.slurm.control import cancel
from evaltui.slurm.jobinfo import SQUEUE_FORMAT, SlurmJobInfo, parse_squeue_line
from evaltui.slurm.jobstate import SlurmJobState

SQUEUE_EVERY_SEC = 2.0
"""How old Slurm's queue may be when a reader asks (the TUI refreshes about once a second)."""
SQUEUE_TIMEOUT_SEC = 5.0
"""A controller that does not answer within this is taken as not reachable, this time."""


def slurm_job_of(scheduler: Mapping[str, Any] | None) -> str | None:
    """The Slurm job a run's scheduler.json says it runs as, or None (not a Slurm run)."""
    job = (scheduler or {}).get("slurm_job_id")
    return job if isinstance(job, str) and job else None


class SlurmQueue:
    """Slurm's queue as one ``squeue --states=all`` read, shared by every reader of this
    process and read again once it is older than ``every`` seconds."""

    def __init__(self, every: float = SQUEUE_EVERY_SEC,
                 clock: Callable[[], float] = time.time) -> None:
        self.every, self.clock = every, clock
        self.calls = 0
        """How many times squeue was run (tests check the one-call-per-refresh rule)."""
        self._lock = threading.Lock()
        self._taken_at = -math.inf
        self._jobs: dict[str, SlurmJobInfo] = {}
        self._why_not: str | None = None

    def lookup(self, job: str, newer_than: float = -math.inf
               ) -> tuple[SlurmJobInfo | None, str | None]:
        """``(info, None)`` for a job in the queue, ``(None, None)`` for one Slurm does not
        list, ``(None, why)`` when Slurm could not be asked. A read taken before
        ``newer_than`` (a wall-clock time: when the run's job was recorded) is not trusted
        to know the job: the queue is read again."""
        with self._lock:  # one squeue at a time; the others wait for its answer
            now = self.clock()
            stale = now - self._taken_at >= self.every
            if stale or (job not in self._jobs and self._why_not is None
                         and self._taken_at < newer_than):
                self._read(now)
            if self._why_not is not None:
                return None, self._why_not
            return self._jobs.get(job), None

    def active(self, jobs: Iterable[str], *, fresh: bool = False) -> dict[str, SlurmJobInfo]:
        """The jobs (or array tasks, ``JOB_TASK``) of ``jobs`` that Slurm lists as not yet
        ended; with ``fresh`` the queue is read again first. SlurmError when Slurm could
        not be asked."""
        with self._lock:
            now = self.clock()
            if fresh or now - self._taken_at >= self.every:
                self._read(now)
            if self._why_not is not None:
                raise SlurmError(self._why_not)
            return {job: info for job in jobs if (info := self._jobs.get(job)) is not None
                    and not info.run_state()[0].terminal}

    def _read(self, now: float) -> None:
        self._taken_at = now
        if missing_commands(["squeue"]):
            self._jobs, self._why_not = {}, "squeue not found on PATH"
            return
        self.calls += 1
        argv = ["squeue", "--noheader", "--states=all", "--array",
                f"--format={SQUEUE_FORMAT}"]
        try:
            done = run_slurm(argv, timeout=SQUEUE_TIMEOUT_SEC)
        except SlurmError as exc:
            self._jobs, self._why_not = {}, str(exc)
            return
        jobs: dict[str, SlurmJobInfo] = {}
        for line in done.stdout.splitlines():
            try:
                info = parse_squeue_line(line)
            except ValueError:
                continue  # not one of ours to read (a line squeue wrapped)
            jobs[str(info.job_id)] = info
        self._jobs, self._why_not = jobs, None


_shared: SlurmQueue | None = None
_shared_lock = threading.Lock()


def shared_queue() -> SlurmQueue:
    """This process's queue read, made on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = SlurmQueue()
        return _shared


def follow_status(run_dir: Path, status: RunStatus, queue: SlurmQueue | None = None
                  ) -> RunStatus:
    """``status`` (a status read of ``run_dir``) with Slurm's word where the run dir has
    none yet; the same object for a run that is not a Slurm run or whose run dir has the
    last word."""
    job = slurm_job_of(status.scheduler)
    if job is None or _run_dir_says_ended(run_dir, status):
        return status
    try:
        recorded = (Path(run_dir) / SCHEDULER_FILENAME).stat().st_mtime
    except OSError:
        recorded = -math.inf
    info, why_not = (queue or shared_queue()).lookup(job, newer_than=recorded)
    has_summary = (Path(run_dir) / SUMMARY_FILENAME).exists()
    cancel = bool((status.scheduler or {}).get("cancel_requested_at"))
    if why_not is not None:  # Slurm not reachable from here: the run dir's own word
        state = RunState.CANCELLED if cancel else \
            RunState.RUNNING if has_summary else RunState.QUEUED
        return _with(status, state, f"Slurm job {job}: not asked ({why_not}); "
                     "the state is the run dir's")
    if info is None:
        if cancel:
            return _with(status, RunState.CANCELLED, None)
        return _with(status, RunState.ABORTED, f"Slurm job {job} is no longer in Slurm's "
                     "queue and the run left no _DONE; its episodes so far are kept (resume "
                     "it)")
    state, reason = info.run_state()
    if state in (RunState.RUNNING, RunState.STARTING):
        return _with(status, RunState.RUNNING if has_summary else RunState.STARTING, None)
    if state is RunState.QUEUED:
        return _with(status, RunState.CANCELLED if cancel else RunState.QUEUED, reason)
    if info.state is SlurmJobState.COMPLETED:  # ended 0, yet no _DONE: not a clean end
        return _with(status, RunState.ABORTED, f"{reason}, but the run left no _DONE")
    return _with(status, state, reason)


def _run_dir_says_ended(run_dir: Path, status: RunStatus) -> bool:
    """The run dir has the last word: ``_DONE`` after a terminal summary, or a terminal
    state written into scheduler.json by whoever followed the job to its end."""
    recorded = (status.scheduler or {}).get("state")
    if recorded in {s.value for s in RunState if s.terminal}:
        return True
    return status.state.terminal and (Path(run_dir) / DONE_FILENAME).exists()


def _with(status: RunStatus, state: RunState, note: str | None) -> RunStatus:
    return dataclasses.replace(status, state=state, note=note)


def waiting_reason(status: RunStatus, recorded: Any) -> Any:
    """Why a run waits, for a view: Slurm's reason for a pending Slurm job, else what its
    scheduler recorded."""
    if status.state is RunState.QUEUED and slurm_job_of(status.scheduler) and status.note:
        return status.note
    return recorded



def record_slurm_end(run_dir: Path, state: RunState, note: str | None,
                     exit_code: int | None = None) -> None:
    """Slurm's final word on a run whose run dir said nothing final (cancelled while
    pending, killed before it could write its summary), kept in its scheduler.json as the
    run's state with Slurm's word in its note: later readers, here or on another login
    node, no longer need to ask Slurm (which forgets ended jobs)."""

    fields: dict[str, Any] = {"state": state, "note": note}
    if exit_code is not None:
        fields["exit_code"] = exit_code
    update_scheduler_record(Path(run_dir), **fields)


def cancel_slurm_run(run_dir: Path, job: str) -> None:
    """Cancel a Slurm run: the request recorded first (so the run reads ``cancelled`` once
    its job is gone, whoever looks), then ``scancel`` of its job. SlurmError (one line) when
    scancel fails; the request stays recorded."""

    request_cancel(Path(run_dir))
    cancel(job)
