"""Slurm's job states, and what each means for an evaltui run (DESIGN §3's RunState).

Slurm knows the job, the run dir knows the run: a follower trusts the run dir first
(``_DONE``, summary.json) and uses this for what the run dir cannot say (pending and
why, or how a job that left no summary ended).
"""

from __future__ import annotations

from enum import StrEnum

from evaltui.contract.states import RunState


class SlurmJobState(StrEnum):
    """A job's state as squeue ``%T`` and scontrol ``JobState=`` print it."""

    PENDING = "PENDING"
    """Waiting for resources, priority, a begin time, a dependency... (the reason says)."""
    CONFIGURING = "CONFIGURING"
    """Allocated; its nodes are getting ready."""
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    """Ended; Slurm is still cleaning up on a node."""
    SUSPENDED = "SUSPENDED"
    STOPPED = "STOPPED"
    SIGNALING = "SIGNALING"
    STAGE_OUT = "STAGE_OUT"
    RESIZING = "RESIZING"
    REQUEUED = "REQUEUED"
    """Being put back in the queue (``scontrol requeue``, a preemption, a node failure)."""
    REQUEUE_HOLD = "REQUEUE_HOLD"
    """Requeued and held until released."""
    REQUEUE_FED = "REQUEUE_FED"
    RESV_DEL_HOLD = "RESV_DEL_HOLD"
    COMPLETED = "COMPLETED"
    """Every process exited 0."""
    FAILED = "FAILED"
    """The batch script exited non-zero (``ExitCode`` says how)."""
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    """Killed at its time limit."""
    PREEMPTED = "PREEMPTED"
    NODE_FAIL = "NODE_FAIL"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    REVOKED = "REVOKED"

    @classmethod
    def read(cls, text: str) -> SlurmJobState | None:
        """The state in ``text`` (``CANCELLED by 0`` as sacct prints it reads CANCELLED);
        None for a state this Slurm has and evaltui does not know."""
        word = text.strip().split(" ", 1)[0].rstrip("+")
        try:
            return cls(word)
        except ValueError:
            return None


RUN_STATE_OF: dict[SlurmJobState, RunState] = {
    SlurmJobState.PENDING: RunState.QUEUED,
    SlurmJobState.REQUEUED: RunState.QUEUED,
    SlurmJobState.REQUEUE_HOLD: RunState.QUEUED,
    SlurmJobState.REQUEUE_FED: RunState.QUEUED,
    SlurmJobState.RESV_DEL_HOLD: RunState.QUEUED,
    SlurmJobState.CONFIGURING: RunState.STARTING,
    SlurmJobState.RUNNING: RunState.RUNNING,
    SlurmJobState.COMPLETING: RunState.RUNNING,
    SlurmJobState.SUSPENDED: RunState.RUNNING,
    SlurmJobState.STOPPED: RunState.RUNNING,
    SlurmJobState.SIGNALING: RunState.RUNNING,
    SlurmJobState.STAGE_OUT: RunState.RUNNING,
    SlurmJobState.RESIZING: RunState.RUNNING,
    SlurmJobState.COMPLETED: RunState.DONE,
    SlurmJobState.FAILED: RunState.FAILED,
    SlurmJobState.SPECIAL_EXIT: RunState.FAILED,
    # resuming with the same memory would be killed again: the user must change something
    SlurmJobState.OUT_OF_MEMORY: RunState.FAILED,
    SlurmJobState.CANCELLED: RunState.CANCELLED,
    SlurmJobState.REVOKED: RunState.CANCELLED,
    # killed from outside with its work intact so far: aborted, and a resume goes on
    SlurmJobState.TIMEOUT: RunState.ABORTED,
    SlurmJobState.PREEMPTED: RunState.ABORTED,
    SlurmJobState.NODE_FAIL: RunState.ABORTED,
    SlurmJobState.BOOT_FAIL: RunState.ABORTED,
    SlurmJobState.DEADLINE: RunState.ABORTED,
}
