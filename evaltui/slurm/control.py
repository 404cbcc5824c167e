"""Acting on a submitted job: cancel, signal, requeue."""

from __future__ import annotations

from evaltui.slurm.commands import SlurmError, run_slurm
from evaltui.slurm.jobid import SlurmJobId


class RequeueRefused(SlurmError):
    """Slurm would not requeue the job (not a batch job, pending, requeue disabled by the
    site, ``PreemptMode=CANCEL``...): the follower must resubmit instead."""


def cancel(job: SlurmJobId | str, signal: str | None = None, batch_only: bool = False) -> None:
    """``scancel``: end the job, or with ``signal`` (``USR1``) only signal it -- every
    step, or with ``batch_only`` the batch step alone. Slurm 22.05 says nothing and exits 0
    for a job it does not know (ended and forgotten): nothing is left to cancel then."""
    argv = ["scancel"]
    if signal is not None:
        argv.append(f"--signal={signal}")
        if batch_only:
            argv.append("--batch")
    run_slurm([*argv, str(job)])


def requeue(job: SlurmJobId | str) -> None:
    """``scontrol requeue``: end the running job and put it back in the queue; it runs
    again with ``SLURM_RESTART_COUNT`` one higher. RequeueRefused with Slurm's reason."""
    try:
        run_slurm(["scontrol", "requeue", str(job)])
    except SlurmError as exc:
        raise RequeueRefused(f"Slurm would not requeue job {job}: "
                             f"{str(exc).removeprefix('scontrol: ')}") from None
